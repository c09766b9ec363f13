"""Spreadsheets, slide decks, e-mail and mailboxes indexed as their parts: a sheet's rows with
their header row (`Budget!A12`), a deck's slides (`slide 3`), a mailbox's messages (`message 5`,
each with its subject, sender and date as facts the filters use) and an e-mail's attachments
through the same readers. The files are other people's, as npm packages carry them
(tests/documents): convert-excel-to-json's workbooks, LokiJS's talk, eml-format's messages,
node-mbox's mailbox; the mailbox and the forwarded message are assembled from them here."""

from __future__ import annotations

import io
import json
import re
import zipfile
from email.message import EmailMessage
from pathlib import Path
from typing import Any

import openpyxl
import pytest

from semsearch.corpus.extract import Unindexable, parse
from semsearch.limits import MAX_MESSAGES, MAX_OFFICE_UNPACKED_BYTES, MAX_SHEET_CELLS

PACKAGES = Path(__file__).parent / "documents" / "node_modules"
WORKBOOK = PACKAGES / "convert-excel-to-json" / "tests" / "test-data.xlsx"
DECK = PACKAGES / "lokijs" / "presentations" / "lokijs.pptx"
MESSAGES = PACKAGES / "eml-format" / "test" / "fixtures"
MAILBOX = PACKAGES / "node-mbox" / "test" / "test-4-message.mbox"
SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


def mailbox() -> bytes:
    """Two of eml-format's messages, then node-mbox's four, as a mail client exports them."""
    parts = []
    for name, envelope in (("sample.eml", "no-reply@example.com"), ("multipart.eml", "foo.bar@example.com")):
        body = (MESSAGES / name).read_bytes().replace(b"\r\n", b"\n").replace(b"\nFrom ", b"\n>From ")
        parts.append(b"From " + envelope.encode() + b" Thu Jan 01 00:00:00 2015\n" + body.rstrip(b"\n") + b"\n\n")
    return b"".join(parts) + MAILBOX.read_bytes()


def forwarded() -> bytes:
    message = EmailMessage()
    message["From"] = "Ops Desk <ops@example.org>"
    message["To"] = "team@example.org"
    message["Subject"] = "Contacts export for the audit"
    message["Date"] = "Tue, 05 Mar 2024 09:30:00 +0000"
    message.set_content(f"The export is attached.\naws_secret_access_key = {SECRET}\n")
    workbook = WORKBOOK.read_bytes()
    message.add_attachment(workbook, maintype="application", subtype="octet-stream", filename="people.xlsx")
    return message.as_bytes()


@pytest.fixture(scope="module")
def office(api_factory: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    folder = tmp_path_factory.mktemp("office") / "office"
    folder.mkdir()
    (folder / "people.xlsx").write_bytes(WORKBOOK.read_bytes())
    (folder / "lokijs.pptx").write_bytes(DECK.read_bytes())
    (folder / "promotions.eml").write_bytes((MESSAGES / "sample.eml").read_bytes())
    (folder / "cc.eml").write_bytes((MESSAGES / "cc.eml").read_bytes())
    (folder / "inbox.mbox").write_bytes(mailbox())
    (folder / "forwarded.eml").write_bytes(forwarded())
    (folder / "broken.xlsx").write_bytes(b"PK\x03\x04 not a workbook")
    with zipfile.ZipFile(folder / "broken.pptx", "w") as deck:
        deck.writestr("ppt/slides/slide1.xml", "<p:sld")  # no presentation.xml, and bad XML
    stack = api_factory()
    stack.cli("add", str(folder))
    summary = stack.index()
    assert summary["filesProcessed"] == 6 and summary["skippedBy"].get("corrupt") == 2, summary
    return stack, folder


def search(stack: Any, query: str, **extra: Any) -> list[dict[str, Any]]:
    with stack.http() as http:
        answer = http.post("/v1/search", json={"query": query, "k": 5, "minScore": -1, **extra})
    assert answer.status_code == 200, answer.text
    return answer.json()["hits"]  # type: ignore[no-any-return]


def shown(stack: Any, hit: dict[str, Any]) -> str:
    with stack.http() as http:
        answer = http.get("/v1/files", params={"path": hit["filePath"], "startLine": hit["startLine"],
                                               "endLine": hit["endLine"]})  # fmt: skip
    assert answer.status_code == 200, answer.text
    return answer.json()["text"]  # type: ignore[no-any-return]


def test_a_sheet_row_is_found_with_its_header_and_its_cell(office: tuple[Any, Path]) -> None:
    stack, _ = office
    (hit,) = search(stack, "Sharon Stone biblegateway.com", ext=["xlsx"], k=1)
    assert hit["relPath"] == "people.xlsx" and hit["heading"] == "sheet2"
    first_row = re.match(r"^sheet2!A(\d+)$", hit["location"])
    assert first_row is not None, hit["location"]
    text = shown(stack, hit)  # the rows `cat` shows at the hit's lines: each value beside its column's name
    assert "first_name: Sharon | last_name: Stone | email: sstone1b@biblegateway.com" in text
    assert text.startswith(f"[{first_row.group(1)}] ") or text.startswith("# sheet2")
    assert "[25] id: 48 | first_name: Sharon" in text  # row 25 of the sheet: the numbers are the sheet's


def test_a_slide_is_found_with_its_number_on_every_surface(office: tuple[Any, Path], tmp_path: Path) -> None:
    stack, folder = office
    query = "a javascript database whose data is plain objects persisted on disk as JSON"
    (hit,) = search(stack, query, ext=["pptx"], k=1)
    assert (hit["location"], hit["page"], hit["heading"]) == ("slide 3", 3, "Slide 3")
    # A line of the slide half remembered: the slide that holds it comes first (the vector arm
    # alone prefers slide 4, which says the same in general words), and says why.
    assert hit["label"].startswith("[quote "), hit["label"]
    assert "persisted on disk as JSON" in shown(stack, hit)
    cli = json.loads(stack.cli("search", query, "--ext", "pptx", "-k", "1", "--min-score", "-1", "--json").stdout)
    assert cli["hits"][0]["location"] == "slide 3"
    (found,) = stack.mcp(("search", {"query": query, "ext": ["pptx"], "k": 1, "minScore": -1}))
    assert json.loads(found.content[0].text)[0]["location"] == "slide 3"
    whole = stack.cli("cat", str(folder / "lokijs.pptx")).stdout
    assert whole.startswith("# Slide 1\nLokiJS\n") and "PK" not in whole[:10]
    path, line, _ = stack.cli("grep", "persisted on disk as JSON").stdout.splitlines()[0].split("\t")
    assert path == hit["filePath"] and hit["startLine"] <= int(line) <= hit["endLine"]


def test_a_mailbox_message_says_its_number_and_its_facts_filter(office: tuple[Any, Path]) -> None:
    stack, _ = office
    hits = search(stack, "The mail content of mail 3", pathGlob=["*.mbox"], k=1)
    assert (hits[0]["location"], hits[0]["heading"]) == ("message 5", "mail 3")
    assert hits[0]["date"] == "2011-12-25"  # the message's own date, not the file's
    # The sender and the date choose messages within one mailbox (and across the eml files).
    promotions = search(stack, "Lorem ipsum winter promotions", tags=["from:no-reply@example.com"], k=10)
    assert promotions and {(h["relPath"], h["location"]) for h in promotions} == {
        ("inbox.mbox", "message 1"),
        ("promotions.eml", None),
    }
    early = search(stack, "mail content", dateTo="2012-01-01", k=10)
    assert early and {h["location"] for h in early} <= {"message 3", "message 4", "message 5", "message 6"}
    assert all(h["relPath"] == "inbox.mbox" for h in early)
    typed = stack.cli("search", "winter promotions", "--tag", "from:no-reply@example.com", "--until", "2015-01-01",
                      "--min-score", "-1", "--json").stdout  # fmt: skip
    assert {h["date"] for h in json.loads(typed)["hits"]} == {"2014-01-29"}


def test_an_attachment_is_read_like_a_file_and_secrets_are_redacted(office: tuple[Any, Path]) -> None:
    stack, folder = office
    (hit,) = search(stack, "Sharon Stone biblegateway.com", pathGlob=["forwarded.eml"], k=1)
    assert hit["heading"] == "Contacts export for the audit > Attachment: people.xlsx > sheet2"
    assert hit["location"] is None  # one message: its subject and the attachment say where
    assert "sstone1b@biblegateway.com" in hit["text"]
    (body,) = search(stack, "aws_secret_access_key", mode="lexical", pathGlob=["forwarded.eml"], k=1)
    assert "[REDACTED" in body["text"] and SECRET not in body["text"]
    whole = stack.cli("cat", str(folder / "forwarded.eml")).stdout
    assert whole.startswith("# Contacts export for the audit\nFrom: Ops Desk") and SECRET not in whole
    with stack.http() as http:
        cc = http.post("/v1/search", json={"query": "To and Cc headers", "pathGlob": ["cc.eml"], "k": 1,
                                           "minScore": -1}).json()["hits"][0]  # fmt: skip
    assert cc["heading"] == "To and Cc headers" and "Cc: foo@example.com" in cc["text"]


def test_hostile_workbooks_decks_and_mailboxes_are_refused_with_their_reason(tmp_path: Path) -> None:
    bomb = io.BytesIO()
    with zipfile.ZipFile(bomb, "w", zipfile.ZIP_DEFLATED) as archive, archive.open("xl/sharedStrings.xml", "w") as f:
        for _ in range(MAX_OFFICE_UNPACKED_BYTES // 1_000_000 + 1):
            f.write(b" " * 1_000_000)
    with pytest.raises(Unindexable) as refused:
        parse(Path("bomb.xlsx"), bomb.getvalue())
    assert refused.value.reason == "too-large" and "unpacks to" in str(refused.value)

    workbook = openpyxl.Workbook()
    sheet = workbook.active
    assert sheet is not None
    for row in range(1, MAX_SHEET_CELLS // 16_384 + 2):
        sheet.cell(row=row, column=16_384, value=row)  # rows as wide as Excel's grid
    wide = io.BytesIO()
    workbook.save(wide)
    with pytest.raises(Unindexable) as refused:
        parse(Path("wide.xlsx"), wide.getvalue())
    assert refused.value.reason == "too-large" and "split the workbook" in str(refused.value)

    envelope = b"From a@example.com Thu Jan 01 00:00:00 2015\nSubject: %d\n\nhi\n\n"
    many = b"".join(envelope % i for i in range(MAX_MESSAGES + 1))
    with pytest.raises(Unindexable) as refused:
        parse(Path("many.mbox"), many)
    assert refused.value.reason == "too-large" and "split the mailbox" in str(refused.value)
    with pytest.raises(Unindexable) as refused:
        parse(Path("notes.mbox"), b"Dear diary,\n")
    assert refused.value.reason == "corrupt" and "From " in str(refused.value)
    assert parse(Path("empty.mbox"), b"")[0] == []
