"""Helpers the tests share: tiny runs, studio runs, reliability checks, hostile files and the golden harness."""
