"""Errors shown to users: one clear message naming the file, line, field and what was expected."""

from __future__ import annotations


class DevlendError(Exception):
    """Base class of every error devlend raises on purpose."""


class TopologyError(DevlendError):
    """A topology description that cannot be built.

    ``file``/``line``/``column`` locate the offending field when the description came from a
    file; ``field`` is the dotted path inside the description (``devices[3].functions[0].bars[1].size``).
    """

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 column: int | None = None, field: str | None = None):
        self.message, self.file, self.line, self.column, self.field = message, file, line, column, field
        super().__init__(self.format())

    def format(self) -> str:
        where = self.file or "<topology>"
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        field = f" {self.field}:" if self.field else ""
        return f"{where}:{field} {self.message}"


class FabricError(DevlendError):
    """A request to the live fabric that cannot be carried out (unknown name, bad argument)."""


class DmaFault(DevlendError):
    """A write or read that did not (fully) reach memory: IOMMU fault, unsupported request,
    requester-ID LUT miss, unmapped NTB window. ``failure`` holds the structured record and
    ``delivered`` how many bytes did land."""

    def __init__(self, failure: dict, delivered: int = 0):
        self.failure, self.delivered = failure, delivered
        super().__init__(failure.get("message", str(failure)))


class WorkloadError(DevlendError):
    """A workload a run cannot carry out: an address no route reaches (``kind`` "unreachable",
    ``failure`` the structured record), zero bytes ("invalid"), or a run that cannot finish."""

    def __init__(self, message: str, kind: str = "invalid", failure: dict | None = None):
        self.kind, self.failure = kind, failure
        super().__init__(message)
