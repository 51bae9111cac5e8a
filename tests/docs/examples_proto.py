"""examples_proto.py - the protocol messages of the documents, for examples.py: a
json or msgpack block's messages (a msgpack block's hex must decode to exactly its
JSON), each request sent to a chipd through a raw mailbox call (docs_raw_call) and its
answer judged against the document's."""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from examples_blocks import Block, Failure
from examples_run import Run

CALL_TIMEOUT_MS = 10000


class Pairs(list):
    """A map as its (key, value) pairs, in order."""


def mp_decode(b: bytes, where: str):
    pos = 0

    def need(n: int) -> bytes:
        nonlocal pos
        if pos + n > len(b):
            raise Failure(f"{where}: msgpack truncated at byte {pos}")
        pos += n
        return b[pos - n:pos]

    def uint(n: int) -> int:
        return int.from_bytes(need(n), "big")

    def sint(n: int) -> int:
        return int.from_bytes(need(n), "big", signed=True)

    def value(depth: int):
        if depth > 8:
            raise Failure(f"{where}: msgpack nested too deep")
        t = need(1)[0]
        if t <= 0x7F:
            return t
        if t >= 0xE0:
            return t - 0x100
        if 0x80 <= t <= 0x8F:
            return Pairs((value(depth + 1), value(depth + 1)) for _ in range(t & 0x0F))
        if 0x90 <= t <= 0x9F:
            return [value(depth + 1) for _ in range(t & 0x0F)]
        if 0xA0 <= t <= 0xBF:
            return need(t & 0x1F).decode()
        simple = {0xC0: None, 0xC2: False, 0xC3: True}
        if t in simple:
            return simple[t]
        sized = {0xCC: 1, 0xCD: 2, 0xCE: 4, 0xCF: 8}
        if t in sized:
            return uint(sized[t])
        ssized = {0xD0: 1, 0xD1: 2, 0xD2: 4, 0xD3: 8}
        if t in ssized:
            return sint(ssized[t])
        strs = {0xD9: 1, 0xDA: 2, 0xDB: 4}
        if t in strs:
            return need(uint(strs[t])).decode()
        if t in (0xDC, 0xDD):
            return [value(depth + 1) for _ in range(uint(2 if t == 0xDC else 4))]
        if t in (0xDE, 0xDF):
            n = uint(2 if t == 0xDE else 4)
            return Pairs((value(depth + 1), value(depth + 1)) for _ in range(n))
        raise Failure(f"{where}: msgpack type byte 0x{t:02x} is not one the protocol uses")

    v = value(0)
    if pos != len(b):
        raise Failure(f"{where}: {len(b) - pos} bytes after the msgpack message")
    return v


def mp_encode(v) -> bytes:
    if v is None:
        return b"\xc0"
    if v is True or v is False:
        return b"\xc3" if v else b"\xc2"
    if isinstance(v, int):
        if 0 <= v <= 0x7F:
            return bytes([v])
        if -32 <= v < 0:
            return bytes([v + 0x100])
        for t, n, lo, hi in ((0xCC, 1, 0, 2**8), (0xCD, 2, 0, 2**16), (0xCE, 4, 0, 2**32),
                             (0xCF, 8, 0, 2**64), (0xD0, 1, -2**7, 2**7),
                             (0xD1, 2, -2**15, 2**15), (0xD2, 4, -2**31, 2**31),
                             (0xD3, 8, -2**63, 2**63)):
            if lo <= v < hi:
                return bytes([t]) + v.to_bytes(n, "big", signed=lo < 0)
        raise Failure(f"integer {v} does not fit msgpack")
    if isinstance(v, str):
        s = v.encode()
        if len(s) < 32:
            return bytes([0xA0 | len(s)]) + s
        if len(s) < 256:
            return b"\xd9" + bytes([len(s)]) + s
        return b"\xda" + len(s).to_bytes(2, "big") + s
    if isinstance(v, Pairs):
        if len(v) >= 16:
            raise Failure("a map of 16 pairs or more: not in the examples' encoder")
        return bytes([0x80 | len(v)]) + b"".join(mp_encode(k) + mp_encode(x) for k, x in v)
    if isinstance(v, list):
        if len(v) >= 16:
            raise Failure("an array of 16 elements or more: not in the examples' encoder")
        return bytes([0x90 | len(v)]) + b"".join(mp_encode(x) for x in v)
    raise Failure(f"{type(v).__name__} in a protocol message")


def strict(v):
    """@v with every type made explicit: True and 1 differ, key order counts."""
    if isinstance(v, bool) or v is None:
        return ("b", v)
    if isinstance(v, int):
        return ("i", v)
    if isinstance(v, Pairs):
        return ("m", [(strict(k), strict(x)) for k, x in v])
    if isinstance(v, list):
        return ("a", [strict(x) for x in v])
    return (type(v).__name__, v)


def json_values(text: str, where: str) -> list:
    dec = json.JSONDecoder(object_pairs_hook=Pairs)
    out, pos = [], 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos == len(text):
            return out
        try:
            v, pos = dec.raw_decode(text, pos)
        except json.JSONDecodeError as e:
            raise Failure(f"{where}: not JSON: {e}") from None
        out.append(v)


@dataclass
class Msg:
    line: int
    value: Pairs
    wire: bytes | None  # the document's bytes, when it gives them


def block_messages(block: Block) -> list[Msg]:
    msgs: list[Msg] = []
    if block.tag == "json":
        text = "\n".join(block.body)
        for v in json_values(text, block.where()):
            if not isinstance(v, Pairs):
                raise Failure(f"{block.where()}: a protocol message is a JSON object")
            msgs.append(Msg(block.line, v, None))
        return msgs
    hexbuf, hexline = b"", 0
    k = 0
    while k < len(block.body):
        ln = block.body[k].strip()
        lineno = block.line + 1 + k
        k += 1
        if not ln:
            continue
        if re.fullmatch(r"[0-9a-fA-F]{2}( [0-9a-fA-F]{2})*", ln):
            hexline = hexline or lineno
            hexbuf += bytes.fromhex(ln)
            continue
        if not ln.startswith("="):
            raise Failure(f"{block.path}:{lineno}: a msgpack block holds hex lines, each "
                          f"message followed by '= JSON'")
        if not hexbuf:
            raise Failure(f"{block.path}:{lineno}: '= JSON' without the hex before it")
        text = ln[1:]
        while True:
            try:
                vals = json_values(text, f"{block.path}:{lineno}")
                break
            except Failure:
                if k == len(block.body):
                    raise
                text += "\n" + block.body[k]
                k += 1
        if len(vals) != 1 or not isinstance(vals[0], Pairs):
            raise Failure(f"{block.path}:{lineno}: '=' is followed by one JSON object")
        where = f"{block.path}:{hexline}"
        got = mp_decode(hexbuf, where)
        if strict(got) != strict(vals[0]):
            raise Failure(f"{where}: the hex decodes to {json.dumps(got)}, the document's "
                          f"JSON is {json.dumps(vals[0])}")
        msgs.append(Msg(hexline, vals[0], hexbuf))
        hexbuf, hexline = b"", 0
    if hexbuf:
        raise Failure(f"{block.path}:{hexline}: hex without its '= JSON' line")
    return msgs


def get(m, key: str):
    if not isinstance(m, Pairs):
        return None
    for k, v in m:
        if k == key:
            return v
    return None


def run_messages(run: Run, block: Block, inst: str, work: Path) -> list[str]:
    """Sends each request of the block to a chipd started for it and judges the answer."""
    msgs = block_messages(block)
    if not msgs:
        raise Failure(f"{block.where()}: a {block.tag} block without a message")
    log = work / "chipd.log"
    proc = None
    notes = []
    try:
        k = 0
        while k < len(msgs):
            req = msgs[k]
            k += 1
            if get(req.value, "op") is None:
                raise Failure(f"{block.path}:{req.line}: an answer without its request "
                              f"before it (a request has \"op\")")
            want = None
            if k < len(msgs) and get(msgs[k].value, "op") is None:
                want = msgs[k]
                k += 1
                if get(want.value, "ok") is None:
                    raise Failure(f"{block.path}:{want.line}: neither a request (\"op\") "
                                  f"nor an answer (\"ok\")")
            if proc is None:
                proc = run.start_chipd(inst, log)
            wire = req.wire if req.wire is not None else mp_encode(req.value)
            r = subprocess.run([run.raw_call, inst, wire.hex(), str(CALL_TIMEOUT_MS)],
                               capture_output=True, text=True, env=run.env,
                               timeout=CALL_TIMEOUT_MS / 1000 + 10)
            if r.returncode != 0:
                raise Failure(f"{block.path}:{req.line}: raw call failed: {r.stderr.strip()}")
            got = mp_decode(bytes.fromhex(r.stdout.strip()), f"{block.path}:{req.line} answer")
            judge(block, req, want, got)
            notes.append(f"line {req.line}: {get(req.value, 'op')} answered "
                         f"{'ok' if get(got, 'ok') else get(get(got, 'error'), 'code')}")
    finally:
        if proc is not None:
            run.stop_chipd(inst, proc, log)
    return notes


def judge(block: Block, req: Msg, want: Msg | None, got) -> None:
    where = f"{block.path}:{req.line}"
    if not isinstance(got, Pairs) or get(got, "v") != 1:
        raise Failure(f"{where}: the answer {json.dumps(got)} is not a version-1 map")
    wok = True if want is None else get(want.value, "ok")
    if get(got, "ok") is not wok:
        raise Failure(f"{where}: answered {json.dumps(got)}; the document says "
                      f"{json.dumps(want.value) if want else 'nothing, so ok:true'}")
    if not wok:
        wcode, gcode = get(get(want.value, "error"), "code"), get(get(got, "error"), "code")
        if wcode != gcode:
            raise Failure(f"{where}: answered {json.dumps(got)}: code {gcode}, the document "
                          f"says {wcode}")
        return
    if want is None:
        return
    wkeys, gkeys = [k for k, _ in want.value], [k for k, _ in got]
    if sorted(wkeys) != sorted(gkeys):
        raise Failure(f"{where}: answered {json.dumps(got)}; the document's answer has the "
                      f"keys {wkeys}")
    for k in wkeys:
        if get(req.value, k) is not None and strict(get(got, k)) != strict(get(want.value, k)):
            raise Failure(f"{where}: answered {k}={json.dumps(get(got, k))}, the document "
                          f"says {json.dumps(get(want.value, k))}")
