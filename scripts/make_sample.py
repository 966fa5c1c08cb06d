#!/usr/bin/env python3
"""Generate the bundled sample corpus: ``neardup/data/sample/sample.jsonl`` + ``sample_pairs.csv``.

All text is generated here from small word lists (no third-party text). The corpus mixes
English and Chinese, long articles and short posts, and plants duplicates whose kind is
recorded in the labels file:

* ``exact``     an identical copy;
* ``format``    case / whitespace / punctuation changes;
* ``light``     a few words substituted, deleted or inserted;
* ``template``  the same text wrapped in a site header and footer;
* ``social``    a short post reposted with ``RT @user:`` / ``//@用户:``, a hashtag, a link, emoji.

Deterministic (seeded): running it again gives byte-identical files.

    python scripts/make_sample.py [--n 1500] [--seed 7]
"""

from __future__ import annotations

import argparse
import csv
import json
import random
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "neardup" / "data" / "sample"

EN_WORDS = [
    "river",
    "mountain",
    "city",
    "market",
    "garden",
    "winter",
    "summer",
    "harbor",
    "village",
    "station",
    "bridge",
    "library",
    "museum",
    "council",
    "teacher",
    "doctor",
    "farmer",
    "engineer",
    "artist",
    "student",
    "minister",
    "reporter",
    "company",
    "factory",
    "school",
    "hospital",
    "festival",
    "election",
    "weather",
    "forest",
    "island",
    "desert",
    "valley",
    "ocean",
    "railway",
    "airport",
    "stadium",
    "report",
    "policy",
    "budget",
    "research",
    "project",
    "energy",
    "water",
    "transport",
    "housing",
    "climate",
    "health",
    "science",
    "music",
    "history",
    "language",
    "culture",
    "family",
    "children",
    "season",
    "morning",
    "evening",
    "answer",
    "question",
    "letter",
    "opened",
    "closed",
    "announced",
    "reported",
    "discovered",
    "planned",
    "finished",
    "started",
    "improved",
    "reduced",
    "increased",
    "built",
    "visited",
    "studied",
    "described",
    "explained",
    "moved",
    "changed",
    "carried",
    "followed",
    "measured",
    "collected",
    "new",
    "old",
    "large",
    "small",
    "early",
    "late",
    "public",
    "local",
    "national",
    "quiet",
    "busy",
    "bright",
    "heavy",
    "careful",
    "modern",
    "quickly",
    "slowly",
    "recently",
    "finally",
    "nearly",
    "often",
    "always",
    "never",
    "together",
    "almost",
]
EN_GLUE = [
    "the",
    "a",
    "of",
    "in",
    "on",
    "at",
    "for",
    "with",
    "from",
    "to",
    "and",
    "by",
    "near",
    "after",
    "before",
    "during",
]
ZH_CHARS = (
    "城市河流山谷花园学校医院图书馆博物馆铁路机场市场工厂公司农民工程师老师学生记者委员会"
    "天气森林岛屿沙漠海洋能源水资源交通住房气候健康科学音乐历史语言文化家庭儿童季节早晨晚上"
    "宣布报告发现计划完成开始改善减少增加建设访问研究描述解释移动改变携带跟随测量收集"
    "新旧大小早晚公共地方国家安静繁忙明亮认真现代迅速缓慢最近终于几乎经常总是从不一起"
)
EN_HEADER = [
    "Home | News | Sports | Weather | Contact",
    "The Daily Sample — Independent local news since 1901",
    "Posted by staff writer / Share on social media",
]
EN_FOOTER = [
    "Copyright 2024 The Daily Sample. All rights reserved.",
    "Subscribe to our newsletter | Privacy policy | Terms of use",
    "Related stories: more from this section",
]
ZH_HEADER = [
    "首页 | 新闻 | 体育 | 天气 | 联系我们",
    "样例日报 — 地方新闻网",
    "来源：样例日报 记者 王明",
]
ZH_FOOTER = [
    "责任编辑：李华",
    "版权声明：本站所有内容未经授权不得转载。",
    "相关阅读：更多本栏目新闻",
]
USERS = ["alice", "bob_news", "cityfan", "dailyreader", "小明", "新闻快讯", "旅行者"]
EMOJI = ["🙂", "🔥", "👍", "🎉", "😮"]


def en_sentence(rng: random.Random) -> str:
    words = []
    for _ in range(rng.randint(8, 16)):
        words.append(rng.choice(EN_WORDS if rng.random() < 0.7 else EN_GLUE))
    s = " ".join(words)
    return s[0].upper() + s[1:] + "."


def zh_sentence(rng: random.Random) -> str:
    n = rng.randint(12, 28)
    return "".join(rng.choice(ZH_CHARS) for _ in range(n)) + "。"


def article(rng: random.Random, lang: str) -> str:
    sent = en_sentence if lang == "en" else zh_sentence
    paras = []
    for _ in range(rng.randint(3, 6)):
        joiner = " " if lang == "en" else ""
        paras.append(joiner.join(sent(rng) for _ in range(rng.randint(3, 6))))
    return "\n\n".join(paras)


def post(rng: random.Random, lang: str) -> str:
    if lang == "en":
        return " ".join(en_sentence(rng) for _ in range(rng.randint(1, 2)))
    return "".join(zh_sentence(rng) for _ in range(rng.randint(1, 2)))


def fmt_variant(rng: random.Random, text: str, lang: str) -> str:
    t = text.upper() if lang == "en" and rng.random() < 0.3 else text
    t = t.replace(". ", ".  ").replace("\n\n", "\n \n")
    if lang == "zh":
        t = t.replace("。", "．") if rng.random() < 0.5 else t.replace("。", "。 ")
    return t.replace(",", " ,") + " "


def light_variant(rng: random.Random, text: str, lang: str) -> str:
    if lang == "en":
        words = text.split(" ")
        for _ in range(max(1, len(words) // 25)):
            i = rng.randrange(len(words))
            op = rng.random()
            if op < 0.4:
                words[i] = rng.choice(EN_WORDS)
            elif op < 0.7 and len(words) > 5:
                del words[i]
            else:
                words.insert(i, rng.choice(EN_WORDS))
        return " ".join(words)
    chars = list(text)
    for _ in range(max(1, len(chars) // 30)):
        i = rng.randrange(len(chars))
        op = rng.random()
        if op < 0.4:
            chars[i] = rng.choice(ZH_CHARS)
        elif op < 0.7 and len(chars) > 5:
            del chars[i]
        else:
            chars.insert(i, rng.choice(ZH_CHARS))
    return "".join(chars)


def template_variant(rng: random.Random, text: str, lang: str) -> str:
    head, foot = (EN_HEADER, EN_FOOTER) if lang == "en" else (ZH_HEADER, ZH_FOOTER)
    return "\n".join(head) + "\n\n" + text + "\n\n" + "\n".join(foot)


def social_variant(rng: random.Random, text: str, lang: str) -> str:
    user = rng.choice(USERS)
    prefix = f"RT @{user}: " if lang == "en" else f"//@{user}: "
    tag = "#news" if lang == "en" else "#新闻#"
    link = (
        f"https://t.co/{rng.randrange(16**6):06x}"
        if lang == "en"
        else f"http://t.cn/{rng.randrange(16**6):06x}"
    )
    return f"{prefix}{text} {tag} {link} {rng.choice(EMOJI)}"


def build(n: int, seed: int) -> tuple[list[dict[str, str]], list[tuple[str, str, int, str]]]:
    rng = random.Random(seed)
    docs: list[dict[str, str]] = []
    pairs: list[tuple[str, str, int, str]] = []

    def add(text: str, lang: str) -> str:
        doc_id = f"s{len(docs):05d}"
        docs.append({"id": doc_id, "text": text, "lang": lang})
        return doc_id

    while len(docs) < n:
        lang = "en" if rng.random() < 0.6 else "zh"
        short = rng.random() < 0.45
        text = post(rng, lang) if short else article(rng, lang)
        orig = add(text, lang)
        r = rng.random()
        if r < 0.55:
            continue  # a unique document
        kinds = ["exact", "format", "light"] + (["social", "social"] if short else ["template"])
        kind = rng.choice(kinds)
        variant = {
            "exact": lambda t, lg: t,
            "format": lambda t, lg: fmt_variant(rng, t, lg),
            "light": lambda t, lg: light_variant(rng, t, lg),
            "template": lambda t, lg: template_variant(rng, t, lg),
            "social": lambda t, lg: social_variant(rng, t, lg),
        }[kind](text, lang)
        pairs.append((orig, add(variant, lang), 1, kind))
    # shuffle so duplicates are not adjacent; ids keep their creation order
    rng.shuffle(docs)
    return docs, pairs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1500)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    docs, pairs = build(args.n, args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / "sample.jsonl").open("w", encoding="utf-8", newline="\n") as fh:
        for d in docs:
            fh.write(json.dumps(d, ensure_ascii=False) + "\n")
    with (args.out / "sample_pairs.csv").open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["id_a", "id_b", "label", "kind"])
        w.writerows(pairs)
    size = (args.out / "sample.jsonl").stat().st_size
    print(
        f"wrote {len(docs)} docs ({size / 1e6:.2f} MB) and {len(pairs)} planted pairs to {args.out}"
    )


if __name__ == "__main__":
    main()
