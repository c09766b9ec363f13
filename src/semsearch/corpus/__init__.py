"""The corpus rules: which folders may be registered, which files of them are indexable
(the one verdict per path), how a file becomes text, what is redacted, and how a read is
confined. Shared by the API and the indexer; depends only on the core."""
