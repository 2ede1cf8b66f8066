"""``mcpkit check``: a rule-based compliance checker for any MCP server, in any language.

    report = await run_checks("python server.py")            # stdio
    report = await run_checks("http://127.0.0.1:8000/mcp")    # Streamable HTTP
    print(render_table(report, color=False)); report.exit_code

Each rule lives in a family module under ``check/rules/`` and names the requirements of
spec/requirements.md it checks.
"""

from .context import CheckContext, Skip
from .model import Finding, Report, Rule
from .registry import all_rules, get_rule, rule
from .render import render_table
from .runner import check, run_checks

__all__ = [
    "run_checks", "check", "render_table", "Report", "Finding", "Rule", "CheckContext", "Skip",
    "all_rules", "get_rule", "rule",
]
