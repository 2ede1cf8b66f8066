"""The reference server's skills (SEP-2640): what the official suite's ``sep-2640-skills-*``
scenarios read, and an example of each shape the extension allows: a skill with supporting
files in nested folders, and one under an organizational prefix."""

from __future__ import annotations

from ..server.server import Server

__all__ = ["SKILLS", "register"]

_PDF = """\
---
name: pdf-processing
description: Extract, fill, and assemble PDF documents
license: Apache-2.0
metadata:
  version: "2.1.0"
---
# PDF processing

Fill a form with the field names in [references/FORMS.md](references/FORMS.md).
Pick the template for the document from `templates/`; EU invoices are in `templates/regional/`.
"""

_FORMS = """\
# Form fields

| field | meaning |
|---|---|
| `name` | the customer's full name |
| `total` | the amount due, in the invoice's currency |
"""

_REFUNDS = """\
---
name: refunds
description: Process customer refund requests per company policy
---
# Refunds

Answer with the wording in [examples/email.md](examples/email.md).
"""

#: skill path -> {file path: content}
SKILLS: dict[str, dict[str, str]] = {
    "pdf-processing": {
        "SKILL.md": _PDF,
        "references/FORMS.md": _FORMS,
        "templates/invoice.md": "# Invoice\n\nTo: {name}\nTotal: {total}\n",
        "templates/regional/eu-invoice.md": "# Invoice (EU)\n\nTo: {name}\nTotal: {total} incl. VAT\n",
    },
    "acme/billing/refunds": {
        "SKILL.md": _REFUNDS,
        "examples/email.md": "Dear {name},\n\nyour refund of {amount} is on its way.\n",
    },
}


def register(server: Server) -> None:
    for path, files in SKILLS.items():
        server.add_skill(path, files)
