"""Writes the generated reference pages of the docs site from the code: `python -m docsgen`.

`make docs` runs it before building; tests/test_docs.py fails when a committed page differs from
what this produces, so the references cannot drift from the code.
"""

from __future__ import annotations

import sys

from docsgen import PAGES, REFERENCE, generate


def main() -> None:
    check = "--check" in sys.argv[1:]
    stale = []
    for name, text in generate().items():
        page = REFERENCE / PAGES[name]
        if page.exists() and page.read_text() == text:
            continue
        stale.append(str(page))
        if not check:
            page.parent.mkdir(parents=True, exist_ok=True)
            page.write_text(text)
    if check and stale:
        sys.exit(f"stale generated pages (run `python -m docsgen`): {', '.join(stale)}")
    print(
        f"{'checked' if check else 'wrote'} {len(PAGES)} reference pages" + (f"; updated {len(stale)}" if stale else "")
    )


if __name__ == "__main__":
    main()
