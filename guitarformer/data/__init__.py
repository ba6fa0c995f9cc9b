"""Data in: readers, the built-in corpus, tokenization, prepared datasets and training windows."""
