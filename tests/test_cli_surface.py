"""The CLI's search, gather and grep options against the REST request models they fill: every
option is a field of the model (under the same name, so `--min-score` is `minScore` on the wire),
except the few that only shape the terminal's output — a drifted or misspelt option fails here."""

from __future__ import annotations

import click
import pytest
from pydantic import BaseModel

from semsearch.cli import SHARED_FLAGS, main
from semsearch.schemas import GatherRequest, GrepRequest, SearchRequest

# What only the CLI has: output shape (`--json`), and a spelling folded into a field (`--files`
# sets `group`); the flags every verb shares (`--limit`, `--folder`, `--glob`) fill the field
# SHARED_FLAGS names for each verb.
OUTPUT_ONLY = {"as_json", "group_files", "timing"}


@pytest.mark.parametrize(
    ("verb", "model"), [("search", SearchRequest), ("gather", GatherRequest), ("grep", GrepRequest)]
)
def test_every_option_is_a_field_of_the_request(verb: str, model: type[BaseModel]) -> None:
    command = main.commands[verb]
    names = {p.name for p in command.params if isinstance(p, click.Option)} - OUTPUT_ONLY
    fields = set(model.model_fields)
    for name in names:
        assert name in fields or fields & set(SHARED_FLAGS.get(name, ())), (verb, name)
    for param in command.params:
        if isinstance(param, click.Argument):
            assert param.name in model.model_fields and model.model_fields[param.name].is_required()


def test_a_service_verbs_flags_override_settings_without_touching_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`semsearch api --port N` builds its settings once (environment, then the flag) and hands
    them to the service; nothing is written into `os.environ` for it to read back."""
    import os

    from semsearch.config import load_settings

    monkeypatch.setenv("SEMSEARCH_PORT", "8001")
    before = dict(os.environ)
    assert load_settings("semsearch api").port == 8001
    assert load_settings("semsearch api", port=9123, host=None).port == 9123
    assert dict(os.environ) == before
    with pytest.raises(SystemExit, match=r"^semsearch api: SEMSEARCH_PORT: .*integer"):
        load_settings("semsearch api", port="not a port")
