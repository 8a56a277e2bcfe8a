"""Importing transcripts: OpenAI Chat Completions, Anthropic Messages, Claude Code session logs, Codex CLI
rollouts, SWE-agent trajectories and ctxweb's own exports, each recognised automatically
(sessions.ingest.importers.detect), translated by its module, and stored through the domain functions by
sessions.ingest.importers.runner."""

from sessions.ingest.importers.detect import FORMATS, parse_transcript
from sessions.ingest.importers.runner import (
    FileReport,
    ImportSummary,
    collect_files,
    import_data,
    import_file,
    import_path,
)
from sessions.wire.parsed import TranscriptError

__all__ = [
    "FORMATS", "FileReport", "ImportSummary", "TranscriptError", "collect_files", "import_data", "import_file",
    "import_path",
    "parse_transcript",
]
