"""The pasted-prompt guard through the real services: a whole agent prompt sent as the query is
searched by its request, and every surface says so; a plain query is searched as sent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from semsearch.engine.guard import guard
from tests.conftest import Stack
from tests.corpus import write_tree

FILES = {
    "auth/session.py": (
        "def refresh_session(client):\n"
        "    # When the access token expires, exchange the refresh token for a new one.\n"
        "    client.token = client.post('/oauth/token', grant='refresh_token')\n"
        "    return client\n"
    ),
    "docs/style.md": (
        "# House style\n\nAlways cite file paths. Respond in Markdown. Be concise and never invent APIs. "
        "You are expected to follow the repository conventions and answer briefly.\n"
    ),
    "billing/invoice.py": "def monthly_invoice(customer):\n    return customer.orders.total()\n",
}
PROMPT = (
    "You are an expert software engineer helping me with my codebase. Always cite file paths. Respond in "
    "Markdown and be concise. Never invent APIs.\n\n```python\ndef handler(request):\n    return render(request)\n"
    "```\n\nHow does the session get refreshed when the access token expires?\n\nFollow the repository conventions."
)


@pytest.fixture(scope="module")
def corpus(stack: Stack, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = write_tree(tmp_path_factory.mktemp("guard") / "app", FILES)
    stack.cli("add", str(root))
    stack.index()
    return root


def search(stack: Stack, query: str) -> dict[str, Any]:
    with stack.http() as http:
        response = http.post("/v1/search", json={"query": query, "k": 3, "minScore": -1})
    assert response.status_code == 200, response.text
    return response.json()  # type: ignore[no-any-return]


def test_a_pasted_prompt_is_searched_by_its_question_and_says_so(stack: Stack, corpus: Path) -> None:
    answer = search(stack, PROMPT)
    assert answer["queryUsed"] == "How does the session get refreshed when the access token expires?"
    assert "looks like a pasted prompt" in answer["queryNote"] and "code block" in answer["queryNote"]
    assert answer["hits"][0]["relPath"] == "auth/session.py"
    plain = search(stack, "refresh the session token")
    assert plain.get("queryNote") is None and plain.get("queryUsed") is None


def test_without_the_guard_the_prompt_is_searched_as_sent(stack: Stack, api_factory: Any, corpus: Path) -> None:
    unguarded = api_factory(SEMSEARCH_QUERY_GUARD="false")
    unguarded.cli("add", str(corpus), "--name", "app2")
    unguarded.index()

    def terms(on: Stack) -> tuple[dict[str, Any], set[str]]:
        with on.http() as http:
            found = http.post("/v1/search", json={"query": PROMPT, "arms": True, "minScore": -1}).json()
        return found, {t.lower() for t in found["arms"]["lexicalTerms"]}

    answer, sent = terms(unguarded)
    assert answer.get("queryNote") is None and answer.get("queryUsed") is None
    boilerplate = {"markdown", "concise", "expert", "cite", "conventions"}
    assert len(boilerplate & sent) >= 3  # BM25 got the boilerplate too
    _, guarded = terms(stack)
    assert not boilerplate & guarded and {"session", "refreshed"} <= guarded


def test_the_note_reaches_the_cli_mcp_and_gather(stack: Stack, corpus: Path) -> None:
    cli = stack.cli("search", PROMPT, "--json")
    assert "note: the query looks like a pasted prompt" in cli.stderr
    assert json.loads(cli.stdout)["hits"][0]["relPath"] == "auth/session.py"

    found, gathered = stack.mcp(("search", {"query": PROMPT, "minScore": -1}), ("gather", {"query": PROMPT, "k": 1}))
    texts = [c.text for c in found.content]
    assert json.loads(texts[0])[0]["relPath"] == "auth/session.py"
    assert any("looks like a pasted prompt" in t for t in texts[1:])
    assert found.structured_content["queryNote"].startswith("the query looks like a pasted prompt")
    assert gathered.content[0].text.startswith("_Note: the query looks like a pasted prompt")


def test_without_a_question_the_request_takes_the_identifiers_of_the_pasted_code() -> None:
    prompt = (
        "You are a senior engineer. Always cite file paths. Never invent APIs.\n\n"
        "```python\ndef rotate_refresh_token(store):\n    store.refreshTokens.clear()\n```\n\n"
        "Explain the failing rotation in the session store."
    )
    guarded = guard(prompt, lambda text: len(text.split()), window=254)
    assert guarded.note is not None and "1 code block" in guarded.note
    assert guarded.used.startswith("Explain the failing rotation in the session store.")
    assert "rotate_refresh_token" in guarded.used and "store.refreshTokens" in guarded.used
    labelled = guard("You are an assistant. Always be brief. Respond in Markdown.\n\nTask: find the retry loop",
                     lambda text: len(text.split()), window=254)  # fmt: skip
    assert labelled.used == "find the retry loop"
