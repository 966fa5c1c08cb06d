"""One decision rule (issue 34): a batch keeps the same documents through the router on three
nodes as on one node, for edits a SimHash distance alone does not catch (B = A with ~8 % of
its words replaced), short posts and Chinese. (keep_first against the writer itself:
tests/online/test_group.py.)"""

from __future__ import annotations

import contextlib
import random

import pytest

pytest.importorskip("fastapi")

from neardup.cluster import ClusterConfig, NodeSpec, create_router
from neardup.online import Deduplicator
from neardup.service import create_app
from neardup.service.client import Client
from neardup.service.config import ServiceConfig
from neardup.service.testing import serve_in_thread

TOKEN = "rule-secret"
WORDS = [f"{a}{b}" for a in ("ka", "lo", "mi", "ne", "su", "ta", "vo", "ri") for b in range(400)]
HAN = [chr(0x4E00 + k) for k in range(1500)]


def english(rng: random.Random, n: int) -> list[str]:
    return [rng.choice(WORDS) for _ in range(n)]


def chinese(rng: random.Random, n: int) -> list[str]:
    return [rng.choice(HAN) for _ in range(n)]


def edit(rng: random.Random, tokens: list[str], frac: float, pool: list[str]) -> list[str]:
    out = list(tokens)
    for k in rng.sample(range(len(out)), max(1, round(frac * len(out)))):
        out[k] = rng.choice(pool)
    return out


def batches(seed: int = 7) -> list[list[dict[str, str]]]:
    """Batches of near-duplicate pairs (and a few unrelated documents) of three kinds."""
    rng = random.Random(seed)
    out: list[list[dict[str, str]]] = []
    stored: list[tuple[list[str], list[str], str]] = []
    k = 0
    for b in range(36):
        kind = ("long", "short", "zh")[b % 3]
        if kind == "long":
            pool, a = WORDS, english(rng, 60)
        elif kind == "short":
            pool, a = WORDS, english(rng, 12)
        else:
            pool, a = HAN, chinese(rng, 80)
        sep = "" if kind == "zh" else " "
        batch = [(a, sep), (edit(rng, a, 0.08, pool), sep)]
        if b % 4 == 0:  # an unrelated document and its own heavier edit in the same batch
            c = english(rng, 40)
            batch += [(c, " "), (edit(rng, c, 0.15, WORDS), " ")]
        if b % 5 == 4 and stored:  # a near-duplicate of a document of an earlier batch
            old, opool, osep = stored[rng.randrange(len(stored))]
            batch.append((edit(rng, old, 0.08, opool), osep))
        stored.append((a, pool, sep))
        docs = []
        for toks, s in batch:
            docs.append({"id": f"d{k}", "text": s.join(toks)})
            k += 1
        out.append(docs)
    return out


@contextlib.contextmanager
def apps(tmp_path, n: int):
    with contextlib.ExitStack() as stack:
        urls = [
            stack.enter_context(
                serve_in_thread(create_app(ServiceConfig(data_dir=tmp_path / f"n{i}", token=TOKEN)))
            )
            for i in range(n)
        ]
        yield urls


def run(url: str, data: list[list[dict[str, str]]]) -> list[list[tuple[bool, bool]]]:
    with Client(url, token=TOKEN, timeout=60.0) as c:
        return [[(d.duplicate, d.added) for d in c.check_and_insert(b)] for b in data]


def test_router_on_three_nodes_keeps_what_one_node_keeps(tmp_path):
    data = batches()
    with apps(tmp_path / "one", 1) as (single,):
        alone = run(single, data)
    with apps(tmp_path / "three", 3) as urls:
        cfg = ClusterConfig(tuple(NodeSpec(f"n{i}", u) for i, u in enumerate(urls)), vnodes=64)
        with serve_in_thread(create_router(cfg, token=TOKEN)) as router:
            routed = run(router, data)
    assert routed == alone
    # the rule was exercised: most pairs are one kept, one duplicate, of every kind
    pairs = [b[:2] for b in alone]
    one_kept = [p == [(False, True), (True, False)] for p in pairs]
    assert sum(one_kept) >= 0.8 * len(pairs)
    for kind in range(3):
        assert sum(one_kept[kind::3]) >= 0.6 * len(pairs[kind::3])
    # ...and not by SimHash distance: some kept-one pairs are far apart in fingerprint bits
    with Deduplicator.open(verify=True) as d:
        far = 0
        for b, ok in zip(data, one_kept, strict=True):
            fa, fb = (x.fingerprint for x in d.check(b[:2]))
            far += ok and (fa ^ fb).bit_count() > 3
    assert far >= len(pairs) // 2
