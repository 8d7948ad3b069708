"""Counting the JSON scan's work without a clock (a wall-clock bound fails under load),
for the parser's tests (test_actions.py) and the server's (test_serve.py)."""

from __future__ import annotations

import lifestack.actions as A


class CountingDecoder:
    """``lifestack.actions``' decoder, counting in ``read`` the characters each candidate
    reads: to its end, to its error, or the whole rest of the text when it recurses too
    deep."""

    def __init__(self, decoder) -> None:
        self.decoder, self.read = decoder, 0

    def raw_decode(self, text, start):
        try:
            obj, end = self.decoder.raw_decode(text, start)
        except RecursionError:
            self.read += len(text) - start
            raise
        except ValueError as exc:
            self.read += max(getattr(exc, "pos", len(text)) - start, 1)
            raise
        self.read += end - start
        return obj, end


def count_decoder_reads(monkeypatch) -> CountingDecoder:
    """Put a :class:`CountingDecoder` in place of the scan's decoder for the test."""
    counter = CountingDecoder(A._DECODER)
    monkeypatch.setattr(A, "_DECODER", counter)
    return counter
