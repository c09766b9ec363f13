"""The REST API: owns the LanceDB index and the folder list; ranks results for every client."""
