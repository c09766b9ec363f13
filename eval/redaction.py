"""`make eval`, redaction part: precision and recall of secret redaction on a corpus of
real-looking keys of every kind it knows, and of look-alikes that must stay (hashes, UUIDs,
base64 test vectors, placeholders, test keys, code that handles passwords).

Keys are generated (seeded) in each provider's published format and planted in the places they
are found in real repositories: `.env` lines, YAML, JSON, code, shell, prose. A planted case is
caught when no character run of its secret survives `redact`; a look-alike case is a false
positive when `redact` replaces anything in it.
"""

from __future__ import annotations

import base64
import hashlib
import random
import string
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any

from rich.table import Table

from eval.run import arguments, console, save
from semsearch.corpus.secrets import redact

ALNUM = string.ascii_letters + string.digits
UPPER_DIGITS = string.ascii_uppercase + string.digits
B64 = ALNUM + "+/"


@dataclass(frozen=True)
class Case:
    kind: str  # the redaction kind it must be caught as, or "look-alike"
    text: str
    secret: str | None  # None for a look-alike


def _r(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _keys(rng: random.Random) -> dict[str, list[str]]:
    """A few real-looking secrets per kind, in the formats the providers publish."""
    return {
        "aws-access-key": [rng.choice(["AKIA", "ASIA"]) + _r(rng, UPPER_DIGITS, 16) for _ in range(6)],
        "github-token": [f"gh{rng.choice('pousr')}_" + _r(rng, ALNUM, 36) for _ in range(4)]
        + ["github_pat_" + _r(rng, ALNUM, 22) + "_" + _r(rng, ALNUM, 59) for _ in range(2)],
        "gitlab-token": ["glpat-" + _r(rng, ALNUM + "-_", 20) for _ in range(6)],
        "slack-token": [
            f"xox{rng.choice('bpa')}-{_r(rng, string.digits, 12)}-{_r(rng, string.digits, 13)}-{_r(rng, ALNUM, 24)}"
            for _ in range(6)
        ],
        "stripe-key": [rng.choice(["sk_live_", "rk_live_"]) + _r(rng, ALNUM, rng.choice([24, 99])) for _ in range(6)],
        "google-api-key": ["AIza" + _r(rng, ALNUM + "-_", 35) for _ in range(6)],
        "anthropic-key": ["sk-ant-api03-" + _r(rng, ALNUM + "-_", 93) + "AA" for _ in range(6)],
        "openai-key": ["sk-proj-" + _r(rng, ALNUM + "-_", 120) for _ in range(3)]
        + ["sk-" + _r(rng, ALNUM, 48) for _ in range(3)],
        "aws-secret-key": [_r(rng, B64, 40) for _ in range(6)],
        "url-password": [_r(rng, ALNUM + "!*.~", rng.randint(8, 24)) for _ in range(6)],
        "password": [_r(rng, ALNUM + "!#%&*.-_", rng.randint(8, 32)) for _ in range(6)],
    }


# Where each kind is found: {s} is the secret.
PLACES: dict[str, list[str]] = {
    "token": [
        "API_TOKEN={s}\n",
        "export GH_TOKEN={s}\n",
        "auth:\n  token: {s}\n",
        '{{"credentials": {{"key": "{s}"}}}}\n',
        'client = Client(key="{s}", retries=3)\n',
        "Use `{s}` to authenticate the deploy job (rotate it monthly).\n",
    ],
    "aws-secret-key": [
        "aws_secret_access_key = {s}\n",
        "AWS_SECRET_ACCESS_KEY={s}\n",
        "  secret_access_key: {s}\n",
        '"SecretAccessKey": "{s}",\n',
        "[default]\naws_access_key_id = AKIAZZZZZZZZZZZZZZZZ\naws_secret_access_key={s}\n",
        "export AWS_SECRET_KEY='{s}'\n",
    ],
    "url-password": [
        "DATABASE_URL=postgres://admin:{s}@db.internal:5432/app\n",
        "git clone https://deploy:{s}@git.example.org/team/repo.git\n",
        'redis_url: "redis://default:{s}@cache:6379/0"\n',
        "amqp://guest:{s}@rabbit/vhost\n",
        'engine = create_engine("mysql+pymysql://app:{s}@localhost/shop")\n',
        "See mongodb://reader:{s}@mongo-1,mongo-2/?replicaSet=rs0 for the replica set.\n",
    ],
    "password": [
        'password = "{s}"\n',
        'DB_PASSWORD="{s}"\n',
        "  client_secret: '{s}'\n",
        '{{"api_key": "{s}", "region": "eu-west-1"}}\n',
        "$config['smtp_password'] => '{s}';\n",
        'conn := Connect(Options{{Password: "{s}"}})\n',
    ],
}


def _private_keys(rng: random.Random) -> list[Case]:
    cases = []
    for kind in ("RSA ", "EC ", "OPENSSH ", "", "ENCRYPTED "):
        body = [_r(rng, B64, 64) for _ in range(rng.randint(6, 20))] + [_r(rng, B64, 20) + "=="]
        block = "\n".join([f"-----BEGIN {kind}PRIVATE KEY-----", *body, f"-----END {kind}PRIVATE KEY-----"])
        cases.append(Case("private-key", f"# deploy key\n{block}\n", body[0]))
    body = [_r(rng, B64, 64) for _ in range(8)]
    cut = "\n".join(["-----BEGIN RSA PRIVATE KEY-----", *body])  # pasted without its END line
    cases.append(Case("private-key", f"key: |\n{cut}\nnext_setting: true\n", body[3]))
    one_line = "\\n".join(["-----BEGIN PRIVATE KEY-----", *body, "-----END PRIVATE KEY-----"])
    cases.append(Case("private-key", f'{{"private_key": "{one_line}"}}\n', body[2]))
    return cases


def planted(seed: int = 19) -> list[Case]:
    rng = random.Random(seed)
    cases = _private_keys(rng)
    for kind, secrets in _keys(rng).items():
        places = PLACES.get(kind, PLACES["token"])
        for secret, place in zip(secrets, places, strict=False):
            cases.append(Case(kind, place.format(s=secret), secret))
    return cases


def _armored(label: str, rng: random.Random) -> str:
    body = "\n".join(_r(rng, B64, 64) for _ in range(4))
    return f"-----BEGIN {label}-----\n{body}\n-----END {label}-----\n"


def look_alikes(seed: int = 19) -> list[Case]:
    """Text that looks like secrets to a careless pattern and is not one."""
    rng = random.Random(seed)
    sha = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(4)]
    sha1 = [hashlib.sha1(str(i).encode()).hexdigest() for i in range(4)]  # noqa: S324 - a look-alike, not a use
    texts = [
        f"commit {sha1[0]}\nAuthor: A Developer <dev@example.org>\n",
        f"sha256sum: {sha[0]}  dist/app.tar.gz\n",
        f"image: registry.example.org/app@sha256:{sha[1]}\n",
        f'"integrity": "sha512-{base64.b64encode(hashlib.sha512(b"x").digest()).decode()}"\n',
        f"request_id = {uuid.UUID(int=rng.getrandbits(128))}\n",
        f'{{"id": "{uuid.UUID(int=rng.getrandbits(128))}", "parent": "{uuid.UUID(int=rng.getrandbits(128))}"}}\n',
        'assert base64.b64encode(b"foobar") == b"Zm9vYmFy"  # RFC 4648 test vector\n',
        f'EXPECTED = "{base64.b64encode(bytes(range(30))).decode()}"\n',
        'password = input("Password: ")\nif password == "":\n    raise SystemExit("empty")\n',
        'password = os.environ["DB_PASSWORD"]\nsecret_key = settings.get("SECRET_KEY")\n',
        'password: "${DB_PASSWORD}"\napi_key: "${API_KEY:-}"\n',
        "client_secret: '{{ vault_client_secret }}'\n",
        'DB_PASSWORD="<your database password>"\n',
        "STRIPE_KEY=sk_test_" + _r(rng, ALNUM, 24) + "  # test mode key from the docs\n",
        "publishable: pk_live_" + _r(rng, ALNUM, 24) + "\n",
        "Access keys start with AKIA; temporary ones with ASIA.\n",
        "We use scikit-learn (import sklearn) and sk-video for the pipeline.\n",
        "ssh://git@github.com/team/repo.git and https://github.com/team/repo.git\n",
        "http://localhost:8080/health and http://user@proxy.internal:3128/\n",
        "The key id is AIza-style for Maps, e.g. AIzaSy… (truncated in docs).\n",
        "token_type = 'Bearer'\nexpires_in = 3600\n",
        _armored("PUBLIC KEY", rng),
        _armored("CERTIFICATE", rng),
        "def rotate(secret):\n    return secret[::-1]\n",
        "glpat is GitLab's prefix for personal access tokens; xoxb- is Slack's for bots.\n",
    ]
    return [Case("look-alike", text, None) for text in texts]


def score(cases: list[Case]) -> dict[str, Any]:
    caught: Counter[str] = Counter()
    total: Counter[str] = Counter()
    false_positives: list[str] = []
    missed: list[str] = []
    for case in cases:
        out, count = redact(case.text)
        if case.secret is None:
            if count:
                false_positives.append(case.text.strip()[:120])
            continue
        total[case.kind] += 1
        if count and case.secret not in out:
            caught[case.kind] += 1
        else:
            missed.append(f"{case.kind}: {case.text.strip()[:120]}")
    tp, fn, fp = sum(caught.values()), sum(total.values()) - sum(caught.values()), len(false_positives)
    return {
        "planted": sum(total.values()),
        "lookAlikes": sum(1 for c in cases if c.secret is None),
        "precision": round(tp / max(tp + fp, 1), 4),
        "recall": round(tp / max(tp + fn, 1), 4),
        "recallByKind": {kind: round(caught[kind] / n, 4) for kind, n in sorted(total.items())},
        "falsePositives": false_positives,
        "missed": missed,
    }


SEEDS = range(5)  # five draws of every kind in every place


def corpus() -> list[Case]:
    return [case for seed in SEEDS for case in planted(seed) + look_alikes(seed)]


def main() -> None:
    args = arguments("python -m eval.redaction", ()).parse_args()
    result = score(corpus())
    table = Table(title="secret redaction: planted keys of every kind vs look-alikes that must stay")
    for column in ("planted", "look-alikes", "precision", "recall", "missed", "false positives"):
        table.add_column(column)
    table.add_row(
        str(result["planted"]), str(result["lookAlikes"]), f"{result['precision']:.3f}", f"{result['recall']:.3f}",
        str(len(result["missed"])), str(len(result["falsePositives"])),
    )  # fmt: skip
    console.print(table)
    for line in result["missed"] + result["falsePositives"]:
        console.print(f"  {line}")
    save(args.out, "redaction", result)


if __name__ == "__main__":
    main()
