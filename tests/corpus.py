"""A small multi-language corpus written by the tests (never copied from elsewhere)."""

from __future__ import annotations

from pathlib import Path

FILES = {
    "README.md": """# Orbital weather station

Firmware and ground software for a balloon-borne weather station.

## Telemetry

The station sends pressure, humidity and temperature readings every ten seconds
over LoRa. The ground receiver stores them in a ring buffer before upload.
""",
    "src/auth.py": '''"""Session handling for the ground dashboard."""

import time


def refresh_session(client, refresh_token):
    """Exchange the long-lived refresh token for a fresh access token.

    The old access token is discarded; the refresh token is rotated on every call.
    """
    response = client.post("/oauth/token", {"grant_type": "refresh_token", "token": refresh_token})
    client.access_token = response["access_token"]
    client.expires_at = time.time() + response["expires_in"]
    return client
''',
    "app/Billing.kt": """package station.billing

data class Invoice(val customer: String, val hours: Int, val rate: Double)

fun totalWithVat(invoice: Invoice, vat: Double = 0.21): Double {
    val net = invoice.hours * invoice.rate
    return net + net * vat
}
""",
    "mobile/lib/main.dart": """import 'package:flutter/material.dart';

void main() => runApp(const StationApp());

class StationApp extends StatelessWidget {
  const StationApp({super.key});

  @override
  Widget build(BuildContext context) {
    return const MaterialApp(home: Text('Balloon altitude chart'));
  }
}
""",
    "notes/gardening.txt": """Tomatoes want six to eight hours of direct sun.
Water deeply twice a week rather than a little every day.
Pinch off the suckers that grow between the stem and the branches.
""",
}


# A source file and its test, which share every word a query about them uses: path boosts decide.
RETRY_REPO = {
    "tests/test_retry.py": "def test_retry_backoff():\n    assert retry_with_backoff(3) == 3\n",
    "src/retry.py": "def retry_with_backoff(times):\n    return times  # retry with exponential backoff\n",
}


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def write_corpus(root: Path) -> Path:
    return write_tree(root, FILES)
