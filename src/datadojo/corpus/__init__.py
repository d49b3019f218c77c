"""Corpus: load, filter and profile data files and dataset folders (``datadojo corpus``).

Every recipe starts from data files: DataMind (§3.1) filters Kaggle CSV/XLSX and BIRD/OmniSQL SQLite files
and describes each with a metadata text *d* (§3.2, Step 1); SciDataSailor (§1, §4) starts from whole,
nested dataset folders; the agent's system prompt needs the same description. The pieces:

* :func:`load` — one entry point from a path to typed :class:`Table` objects (or a :class:`LoadError`
  naming file, problem and place); :func:`sniff` tells file kinds by content;
* :func:`filter_file`, :class:`FilterConfig` — DataMind's filters with a reason for each rejection;
* :func:`profile_file`, :func:`column_roles`, :func:`profile_text` — the profile *d* as data and as text
  within a budget;
* :func:`profile_folder` — a dataset folder's tree, kinds and file profiles (array formats — netCDF,
  HDF5, NumPy, FITS, Zarr, Parquet datasets — in :mod:`datadojo.corpus.arrays`, every variable with its
  units; a corrupt one is ``unreadable``);
* :func:`datadojo.corpus.inputs.require_data_files` — the "no data files in …" check of every pipeline;
* :func:`scan_corpus` — filter and profile many files into a resumable ``corpus.jsonl``;
* :func:`header_overlap` — the contamination check of DataMind Appendix H.

The two calls other stages need::

    from datadojo.corpus import load, column_roles, profile_text
    db = load("shop.sqlite")                      # tables with primary_key, foreign_keys, ddl
    roles = column_roles(db.table("orders"))      # {"order_id": "key", "status": "category", ...}
    d = profile_text("shop.sqlite", budget_chars=3000)
"""

from typing import TYPE_CHECKING

from datadojo.corpus.sniff import FILE_KINDS, TABULAR_KINDS, Sniffed, sniff
from datadojo.lazy import lazy_exports

if TYPE_CHECKING:
    from datadojo.corpus.config import FilterConfig, OverlapConfig, ReadOptions, ScanConfig
    from datadojo.corpus.contamination import (
        HeaderSet,
        OverlapReport,
        collect_headers,
        header_overlap,
    )
    from datadojo.corpus.filters import REJECT_REASONS, DuplicateFilter, FilterVerdict, filter_file
    from datadojo.corpus.folder import FolderProfile, TreeEntry, profile_folder
    from datadojo.corpus.profile import (
        COLUMN_ROLES,
        ColumnProfile,
        FileProfile,
        TableProfile,
        column_role,
        column_roles,
        profile_file,
        profile_loaded,
        profile_table,
    )
    from datadojo.corpus.readers import load, load_sniffed
    from datadojo.corpus.render import profile_text, render_file_profile, render_folder_profile
    from datadojo.corpus.scan import CorpusRecord, ScanSummary, scan_corpus
    from datadojo.corpus.tables import (
        COLUMN_TYPES,
        LOAD_ERROR_REASONS,
        ForeignKey,
        LoadedFile,
        LoadError,
        Table,
        infer_column_type,
    )

__all__ = [
    "COLUMN_ROLES",
    "COLUMN_TYPES",
    "FILE_KINDS",
    "LOAD_ERROR_REASONS",
    "REJECT_REASONS",
    "TABULAR_KINDS",
    "ColumnProfile",
    "CorpusRecord",
    "DuplicateFilter",
    "FileProfile",
    "FilterConfig",
    "FilterVerdict",
    "FolderProfile",
    "ForeignKey",
    "HeaderSet",
    "LoadError",
    "LoadedFile",
    "OverlapConfig",
    "OverlapReport",
    "ReadOptions",
    "ScanConfig",
    "ScanSummary",
    "Sniffed",
    "Table",
    "TableProfile",
    "TreeEntry",
    "collect_headers",
    "column_role",
    "column_roles",
    "filter_file",
    "header_overlap",
    "infer_column_type",
    "load",
    "load_sniffed",
    "profile_file",
    "profile_folder",
    "profile_loaded",
    "profile_table",
    "profile_text",
    "render_file_profile",
    "render_folder_profile",
    "scan_corpus",
    "sniff",
]

_WHERE = {
    "HeaderSet": "contamination",
    "OverlapConfig": "config",
    "OverlapReport": "contamination",
    "collect_headers": "contamination",
    "header_overlap": "contamination",
    "REJECT_REASONS": "filters",
    "DuplicateFilter": "filters",
    "FilterConfig": "config",
    "FilterVerdict": "filters",
    "filter_file": "filters",
    "FolderProfile": "folder",
    "TreeEntry": "folder",
    "profile_folder": "folder",
    "COLUMN_ROLES": "profile",
    "ColumnProfile": "profile",
    "FileProfile": "profile",
    "TableProfile": "profile",
    "column_role": "profile",
    "column_roles": "profile",
    "profile_file": "profile",
    "profile_loaded": "profile",
    "profile_table": "profile",
    "load": "readers",
    "load_sniffed": "readers",
    "profile_text": "render",
    "render_file_profile": "render",
    "render_folder_profile": "render",
    "CorpusRecord": "scan",
    "ScanConfig": "config",
    "ScanSummary": "scan",
    "scan_corpus": "scan",
    "COLUMN_TYPES": "tables",
    "LOAD_ERROR_REASONS": "tables",
    "ForeignKey": "tables",
    "LoadedFile": "tables",
    "LoadError": "tables",
    "ReadOptions": "config",
    "Table": "tables",
    "infer_column_type": "tables",
}

# The names import their module on first use: ``datadojo.corpus.config`` (what the CLI reads at start-up)
# must not load pandas through this package. ``sniff`` (light) is imported above: the function must win
# over the submodule of the same name, which ``corpus.config`` imports.
__getattr__, __dir__ = lazy_exports("datadojo.corpus", _WHERE, globals())
