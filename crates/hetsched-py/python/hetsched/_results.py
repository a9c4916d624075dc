"""Results as plain records: each document is the command's JSON document (a dict, provenance
included, docs/json.md), with its rows as a list of dicts and a ``to_pandas()`` helper."""

from __future__ import annotations

from typing import Any, Dict, List

#: The provenance fields every document starts with (docs/json.md).
PROVENANCE_FIELDS = ("schema_version", "hetsched_version", "git_commit", "command", "inputs")


class Document(dict):
    """A JSON document of the ``hetsched`` command, as a dict."""

    @property
    def provenance(self) -> Dict[str, Any]:
        """What produced the document: schema, version, commit, command line, inputs."""
        return {k: self[k] for k in PROVENANCE_FIELDS if k in self}

    def records(self) -> List[Dict[str, Any]]:
        """The document's table, one dict a row."""
        raise NotImplementedError

    def to_pandas(self) -> "Any":
        """The records as a pandas DataFrame; the provenance in ``df.attrs["provenance"]``."""
        import pandas as pd

        df = pd.DataFrame.from_records(self.records())
        df.attrs["provenance"] = self.provenance
        return df


class SimulateResult(Document):
    """``simulate --json``: ``machine``, ``workload``, ``results`` (per policy, means over seeds),
    ``runs``; :attr:`rows` has one row per policy x app x seed, as ``simulate --csv``."""

    def __init__(self, document: Dict[str, Any], rows: List[Dict[str, Any]]) -> None:
        super().__init__(document)
        #: One dict per policy x app x seed (the columns of ``simulate --csv``).
        self.rows: List[Dict[str, Any]] = rows

    def records(self) -> List[Dict[str, Any]]:
        return self.rows

    def speedups(self) -> Dict[str, float]:
        """Each policy's mean speedup over the baseline policy."""
        return {r["policy"]: r["speedup_vs_baseline"] for r in self["results"]}

    def __repr__(self) -> str:
        return (
            f"SimulateResult(machine={self['machine']!r}, workload={self['workload']!r}, "
            f"speedups={self.speedups()!r})"
        )


class ReproduceResult(Document):
    """``reproduce --json``: ``experiments``, each with rows (paper's value beside ours)."""

    def records(self) -> List[Dict[str, Any]]:
        """One row per experiment row, as ``reproduce --csv``."""
        return [
            {
                "experiment": e["experiment"],
                "kernel_baseline": e["baseline"],
                **{k: r[k] for k in ("label", "paper_value", "our_value", "unit", "holds", "note")},
            }
            for e in self["experiments"]
            for r in e["rows"]
        ]


class SignatureResult(Document):
    """``signature --json``: misses per 4096 instructions over cache sizes and associativities."""

    def records(self) -> List[Dict[str, Any]]:
        """One row per associativity and cache size of the whole trace, as ``signature --csv``."""
        return [
            {
                "name": self["name"],
                "line_bytes": self["line_bytes"],
                "cache_bytes": size,
                "assoc": assoc,
                "misses_per_4096_instr": self["misses_per_4096"][i][j],
            }
            for i, assoc in enumerate(self["assoc"])
            for j, size in enumerate(self["sizes_bytes"])
        ]
