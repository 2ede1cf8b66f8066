"""The labelled corpus of the secret detectors (policy/detectors.py), and what they score on it.

    python tools/redaction_corpus.py            # recall per kind, false positives, cost per call
    python tools/redaction_corpus.py --write    # generate tests/trust/corpus/*.jsonl again

``positives.jsonl``: one secret per line, ``{"kind", "value", "secret"}``: ``value`` is a string
or a JSON value holding it (prose, an .env file, a command line, a tool's arguments), ``secret``
the part that must not survive. Every secret is synthetic: the shape of a real credential
(prefix, alphabet, length, checksum: Luhn, mod-97), drawn from a seeded generator, valid for no
service. ``negatives.jsonl``: ``{"what", "value"}``, hard negatives: UUIDs, git SHAs, hashes,
base64 images, card-like numbers that fail Luhn, version strings, dates, addresses, prose that
speaks of passwords, code. tests/trust/test_corpus.py holds the floors.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import random
import string
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "trust" / "corpus"
SEED = 20261127
PER_KIND = 30

ALNUM = string.ascii_letters + string.digits
B64URL = ALNUM + "-_"


def _s(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _luhn_complete(rng: random.Random, prefix: str, length: int) -> str:
    body = prefix + "".join(rng.choice(string.digits) for _ in range(length - len(prefix) - 1))
    for check in string.digits:
        digits = body + check
        total = 0
        for i, c in enumerate(reversed(digits)):
            d = int(c) * (2 if i % 2 else 1)
            total += d - 9 if d > 9 else d
        if total % 10 == 0:
            return digits
    raise AssertionError("unreachable")


def _iban(rng: random.Random, country: str, length: int, letters: int = 0) -> str:
    bban = _s(rng, string.ascii_uppercase, letters) + _s(rng, string.digits, length - 4 - letters)
    number = int("".join(str(int(c, 36)) for c in bban + country + "00"))
    return f"{country}{98 - number % 97:02d}{bban}"


def _password(rng: random.Random) -> str:
    return _s(rng, ALNUM, rng.randint(6, 10)) + rng.choice("!#%^*_-+") + _s(rng, ALNUM, rng.randint(3, 8))


# what surrounds a secret: a few of the places a model or a tool puts one
_CONTEXTS = [
    "{}",
    "here is the key: {} (do not share)",
    "export SOME_VALUE={}\n",
    '{{"note": "{}"}}',
    "line one\nline two has {} in it\nline three",
]


def _embed(rng: random.Random, secret_text: str, *, json_too: bool = True) -> Any:
    if json_too and rng.random() < 0.3:
        return {"request": {"headers": {"x-note": secret_text}, "count": 3}, "tags": ["a", "b"]}
    return rng.choice(_CONTEXTS).format(secret_text)


def positives(rng: random.Random) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def add(kind: str, value: Any, secret: str) -> None:
        out.append({"kind": kind, "value": value, "secret": secret})

    for _ in range(PER_KIND):
        key = rng.choice(["AKIA", "ASIA"]) + _s(rng, string.ascii_uppercase + "234567", 16)
        add("aws-access-key", _embed(rng, key), key)
        key = "AIza" + _s(rng, B64URL, 35)
        add("google-api-key", _embed(rng, key), key)
        key = rng.choice(["ghp_", "gho_", "ghu_", "ghs_", "ghr_"]) + _s(rng, ALNUM, 36)
        if rng.random() < 0.25:
            key = "github_pat_" + _s(rng, ALNUM, 22) + "_" + _s(rng, ALNUM, 59)
        add("github-token", _embed(rng, key), key)
        key = (rng.choice(["xoxb-", "xoxp-", "xoxa-", "xoxr-"]) + _s(rng, string.digits, 12) + "-"
               + _s(rng, string.digits, 13) + "-" + _s(rng, ALNUM, 24))
        add("slack-token", _embed(rng, key), key)
        key = rng.choice(["sk_live_", "rk_live_", "sk_test_"]) + _s(rng, ALNUM, rng.choice([24, 34, 99]))
        add("stripe-key", _embed(rng, key), key)
        key = rng.choice(["sk-proj-" + _s(rng, B64URL, 48), "sk-ant-api03-" + _s(rng, B64URL, 93),
                          "sk-" + _s(rng, ALNUM, 48)])
        add("ai-api-key", _embed(rng, key), key)
        header = _b64url(json.dumps({"alg": rng.choice(["HS256", "RS256"]), "typ": "JWT"}).encode())
        payload = _b64url(json.dumps({"sub": str(rng.randint(1, 10**9)), "iat": rng.randint(1_600_000_000, 1_800_000_000)}).encode())
        token = f"{header}.{payload}.{_b64url(rng.randbytes(32))}"
        add("jwt", _embed(rng, token), token)
        label = rng.choice(["RSA PRIVATE KEY", "EC PRIVATE KEY", "OPENSSH PRIVATE KEY", "PRIVATE KEY",
                            "ENCRYPTED PRIVATE KEY"])
        body = base64.b64encode(rng.randbytes(rng.choice([120, 300, 900]))).decode()
        lines = "\n".join(body[i:i + 64] for i in range(0, len(body), 64))
        pem = f"-----BEGIN {label}-----\n{lines}\n-----END {label}-----"
        add("private-key", rng.choice([pem, f"key file:\n{pem}\n", {"files": {"id_rsa": pem}}]), body[:64])
        password = _password(rng).replace("@", "x")
        host = rng.choice(["db.example.com", "10.0.3.7", "cache.internal.example.org"])
        url = rng.choice([f"postgres://app:{password}@{host}:5432/prod", f"https://deploy:{password}@{host}/repo.git",
                          f"redis://default:{password}@{host}:6379/0", f"scp deploy:{password}@{host}:/srv/x ."])
        add("url-password", _embed(rng, url), password)
        token = _s(rng, B64URL + ".~", rng.randint(24, 60))
        basic = base64.b64encode(f"user{rng.randint(1, 99)}:{_password(rng)}".encode()).decode()
        header = rng.choice([f"Authorization: Bearer {token}", f"Authorization: Basic {basic}"])
        add("http-auth", _embed(rng, header), token if "Bearer" in header else basic)
        password = _password(rng)
        line = rng.choice([f"curl -u admin:{password} https://api.example.com/v1", f"mysql -u root -p{password} shop",
                           f"sshpass -p {password} ssh ops@bastion", f"tool login --password {password}",
                           f"psql --password={password} -h db"])
        add("cli-password", _embed(rng, line), password)
        password = _password(rng)
        line = rng.choice([f"DB_PASSWORD={password}", f"api_key={password}", f"GITHUB_TOKEN={password}",
                           f"https://example.com/hook?token={password}&x=1", f"client_secret = {password}"])
        add("password-assignment", _embed(rng, line), password)
        network = rng.choice([("4", 16), ("51", 16), ("55", 16), ("2221", 16), ("34", 15), ("37", 15), ("6011", 16)])
        card = _luhn_complete(rng, *network)
        shown = rng.choice([card, " ".join(card[i:i + 4] for i in range(0, len(card), 4)),
                            "-".join(card[i:i + 4] for i in range(0, len(card), 4))])
        add("payment-card", _embed(rng, f"card {shown} exp 12/29"), shown[1:])
        # PII (opt-in kinds)
        email = f"{_s(rng, string.ascii_lowercase, 6)}.{_s(rng, string.ascii_lowercase, 5)}@" \
                f"{rng.choice(['example.com', 'mail.example.org', 'corp.example.co.uk'])}"
        add("email", _embed(rng, f"write to {email} today"), email)
        phone = rng.choice([f"+44 20 7946 {rng.randint(0, 9999):04d}", f"+1 {rng.randint(200, 999)} 555 {rng.randint(0, 9999):04d}",
                            f"({rng.randint(200, 999)}) 555-{rng.randint(0, 9999):04d}",
                            f"{rng.randint(200, 999)}-555-{rng.randint(0, 9999):04d}", f"+49 30 {rng.randint(1000000, 9999999)}"])
        add("phone", _embed(rng, f"call {phone} after 5"), phone)
        country, length, letters = rng.choice([("DE", 22, 0), ("FR", 27, 0), ("GB", 22, 4), ("NL", 18, 4), ("ES", 24, 0)])
        iban = _iban(rng, country, length, letters)
        shown = rng.choice([iban, " ".join(iban[i:i + 4] for i in range(0, len(iban), 4))])
        add("iban", _embed(rng, f"pay to {shown} by Friday"), shown)
        ssn = f"{rng.choice([rng.randint(1, 665), rng.randint(667, 899)]):03d}-{rng.randint(1, 99):02d}-{rng.randint(1, 9999):04d}"
        add("us-ssn", _embed(rng, f"SSN {ssn} on file"), ssn)
    return out


def negatives(rng: random.Random) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def add(what: str, value: Any) -> None:
        out.append({"what": what, "value": value})

    for _ in range(PER_KIND):
        add("uuid", f"request {uuid.UUID(int=rng.getrandbits(128), version=4)} done")
        add("git sha", f"commit {rng.randbytes(20).hex()} (HEAD -> main)")
        add("sha256", f"sha256:{hashlib.sha256(rng.randbytes(16)).hexdigest()}")
        add("md5", hashlib.md5(rng.randbytes(16)).hexdigest())  # noqa: S324 - a shape, not a use
        add("base64 image", f"data:image/png;base64,{base64.b64encode(rng.randbytes(300)).decode()}")
        add("base64 blob in JSON", {"type": "text", "text": base64.b64encode(rng.randbytes(120)).decode()})
        bad = _luhn_complete(rng, "4", 16)
        bad = bad[:-1] + str((int(bad[-1]) + rng.randint(1, 9)) % 10)
        add("card-like, failing Luhn", f"order {bad} shipped")
        add("order number", f"order #{rng.randint(10**11, 10**12)} and invoice {rng.randint(10**15, 10**16)}7")
        add("timestamp", f"at {rng.randint(1_600_000_000_000, 1_800_000_000_000)} ms, {rng.randint(1_600_000_000, 1_800_000_000)} s")
        add("version", f"requires mcp>={rng.randint(0, 3)}.{rng.randint(0, 30)}.{rng.randint(0, 9)}, node v{rng.randint(14, 24)}.{rng.randint(0, 12)}.0-rc.1")
        add("date and time", f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}T{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:00Z")
        add("IPv4 and port", f"listening on {rng.randint(1, 223)}.{rng.randint(0, 255)}.{rng.randint(0, 255)}.{rng.randint(1, 254)}:{rng.randint(1024, 65535)}")
        add("IPv6", f"fe80::{rng.randbytes(2).hex()}:{rng.randbytes(2).hex()}:{rng.randbytes(2).hex()}")
        add("hex color and css", f"color: #{rng.randbytes(3).hex()}; margin: {rng.randint(0, 40)}px")
        add("price", f"total ${rng.randint(1, 9)},{rng.randint(100, 999)}.{rng.randint(10, 99)}")
        add("isbn", f"ISBN 978-{rng.randint(0, 9)}-{rng.randint(10, 99)}-{rng.randint(100000, 999999)}-{rng.randint(0, 9)}")
        add("random identifier", f"id_{_s(rng, string.ascii_lowercase + string.digits, 24)}")
    prose = [
        "Reset your password from the settings page.",
        "The password must be at least 12 characters long and contain a digit.",
        "Never share your API key or token with anyone, including support staff.",
        "If you forgot the passphrase, the key cannot be recovered.",
        "Use a password manager; basic authentication is disabled for this account.",
        "Bearer tokens expire after one hour; refresh them with the refresh token.",
        "The secret to good bread is time.",
        "See https://example.com/docs/auth#tokens for how tokens are issued.",
        "Skip the sk- prefix discussion for now.",
        "He met her at 10:30@cafe near the station.",
    ]
    code = [
        "password = getpass.getpass('Password: ')",
        "token = os.environ['GITHUB_TOKEN']",
        "def authenticate(user: str, password: str) -> bool:",
        "if password == confirm:\n    save(user, password=password_hash)",
        "api_key = settings.API_KEY",
        'const token = process.env.SLACK_TOKEN;',
        "DB_PASSWORD=${DB_PASSWORD:?set it}",
        "password=<your password>",
        "curl -H \"Authorization: Bearer $TOKEN\" https://api.example.com",
        "git clone git@github.com:example/repo.git",
        "for (let i = 0; i < 4111; i++) { total += i; }",
        "SELECT id, email_verified FROM users WHERE created_at > '2026-01-01';",
        "import base64; base64.b64decode(data)",
        "ssh -i ~/.ssh/id_ed25519 deploy@host.example.com",
    ]
    for text in prose:
        add("prose", text)
    for text in code:
        add("code", text)
    return out


def generate() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rng = random.Random(SEED)
    return positives(rng), negatives(rng)


def write() -> None:
    CORPUS.mkdir(parents=True, exist_ok=True)
    pos, neg = generate()
    for name, rows in (("positives", pos), ("negatives", neg)):
        (CORPUS / f"{name}.jsonl").write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))


def load(name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (CORPUS / f"{name}.jsonl").read_text().splitlines()]


def measure(kinds: tuple[str, ...]) -> dict[str, Any]:
    """Recall per kind (a secret counts as found when its kind is reported and its text is gone)
    over the positives of ``kinds``, and the negatives on which anything was reported."""
    from mcpkit.proxy.redaction import MARKER, scan

    from mcpkit.policy.redact import Redactor

    redactor = Redactor(kinds=kinds, marker=MARKER)
    recall: dict[str, list[int]] = {}
    missed: list[dict[str, Any]] = []
    for row in load("positives"):
        if row["kind"] not in kinds:
            continue
        found: list[tuple[str, str]] = []
        out = scan(row["value"], redactor, found)
        hit = any(k == row["kind"] for k, _ in found) and row["secret"] not in json.dumps(out)
        tally = recall.setdefault(row["kind"], [0, 0])
        tally[0] += hit
        tally[1] += 1
        if not hit:
            missed.append(row)
    false_positives = []
    for row in load("negatives"):
        found = []
        scan(row["value"], redactor, found)
        if found:
            false_positives.append({**row, "found": found})
    negatives_total = len(load("negatives"))
    return {"recall": {k: hits / total for k, (hits, total) in recall.items()}, "missed": missed,
            "false_positives": false_positives, "negatives": negatives_total}


def cost(kinds: tuple[str, ...], rounds: int = 400) -> dict[str, float]:
    """CPU microseconds to scan one tool result of 4 KiB of prose, clean and with one secret:
    the best of five batches (the machine's other load only ever adds)."""
    from mcpkit.proxy.redaction import MARKER, scan

    from mcpkit.policy.redact import Redactor

    redactor = Redactor(kinds=kinds, marker=MARKER)
    words = ("the quick brown fox jumps over the lazy dog while 42 servers answer tools/call "
             "requests from https://example.com/api/v1 at 10:30 on 2026-11-27, version 1.2.3; ").split()
    rng = random.Random(1)
    text = ""
    while len(text) < 4096:
        text += rng.choice(words) + " "
    text = text[:4096]
    clean = {"content": [{"type": "text", "text": text}], "structuredContent": {"summary": text[:200], "n": 3}}
    dirty = {"content": [{"type": "text", "text": text[:2000] + " AKIAQX4ZT7NRW2LBJ5HM " + text[2000:4075]}]}
    out = {}
    for name, value in (("clean", clean), ("one secret", dirty)):
        scan(value, redactor, [])
        best = float("inf")
        for _ in range(5):
            started = time.process_time()  # CPU time: other processes on the machine do not count
            for _ in range(rounds):
                scan(value, redactor, [])
            best = min(best, (time.process_time() - started) / rounds * 1e6)
        out[name] = best
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="generate the corpus files again")
    args = parser.parse_args()
    if args.write:
        write()
        return 0
    from mcpkit.policy.detectors import ALL_KINDS, DEFAULT_KINDS, PII_KINDS

    for label, kinds in (("secrets (default)", DEFAULT_KINDS), ("pii", PII_KINDS), ("all", ALL_KINDS)):
        result = measure(kinds)
        print(f"{label}:")
        for kind, value in result["recall"].items():
            print(f"  recall {kind:20} {value:.3f}")
        print(f"  false positives {len(result['false_positives'])} of {result['negatives']} negatives")
        for row in result["false_positives"]:
            print(f"    {row['what']}: {row['found']}")
        for row in result["missed"]:
            print(f"    missed {row['kind']}: {json.dumps(row['value'])[:120]}")
    for label, kinds in (("secrets (default)", DEFAULT_KINDS), ("all", ALL_KINDS)):
        timing = cost(kinds)
        print(f"cost per 4 KiB result, {label}: " + ", ".join(f"{k} {v:.1f} µs" for k, v in timing.items()))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "src"))
    sys.exit(main())
