"""The Hub keeps tables, not files: these rebuild a dataset's canonical files from its rows."""
from __future__ import annotations

import json


def _tsv(header: str, *columns) -> str:
    return header + "\n" + "".join(f"{a}\t{b}\n" for a, b in zip(*columns))


def _sst2_files(splits) -> dict[str, str]:
    """GLUE's TSVs. The Hub keeps GLUE's trailing space in each sentence, so the bytes are GLUE's."""
    train, dev, test = splits["train"], splits["validation"], splits["test"]
    return {"train.tsv": _tsv("sentence\tlabel", train["sentence"], train["label"]),
            "dev.tsv": _tsv("sentence\tlabel", dev["sentence"], dev["label"]),
            "test.tsv": _tsv("index\tsentence", test["idx"], test["sentence"])}


def _squad_json(rows) -> str:
    """Regroup one row per question into SQuAD's nested articles > paragraphs > qas.

    Rows keep the file's order, so a new title starts an article and a new context a paragraph.
    The Hub strips whitespace around titles, contexts, questions and answers, which the official file
    keeps in a few hundred places; everything else comes out byte for byte.
    """
    articles = []
    for row in rows:
        if not articles or articles[-1]["title"] != row["title"]:
            articles.append({"title": row["title"], "paragraphs": []})
        paragraphs = articles[-1]["paragraphs"]
        if not paragraphs or paragraphs[-1]["context"] != row["context"]:
            paragraphs.append({"context": row["context"], "qas": []})
        answers = [{"answer_start": start, "text": text}
                   for start, text in zip(row["answers"]["answer_start"], row["answers"]["text"])]
        paragraphs[-1]["qas"].append({"answers": answers, "question": row["question"], "id": row["id"]})
    return json.dumps({"data": articles, "version": "1.1"})


def _squad_files(splits) -> dict[str, str]:
    return {"train-v1.1.json": _squad_json(splits["train"]),
            "dev-v1.1.json": _squad_json(splits["validation"])}


def _wikitext_files(splits) -> dict[str, str]:
    """wiki.*.raw: the Hub has one row per line, newline kept, but turns the blank lines " \\n" into ""."""
    return {f"wiki.{short}.raw": "".join(line or " \n" for line in splits[split]["text"])
            for short, split in (("train", "train"), ("valid", "validation"), ("test", "test"))}


# dataset -> (its Hub tables -> {file name: text})
HUB_TO_FILES = {"sst2": _sst2_files, "squad_v1.1": _squad_files, "wikitext2_raw": _wikitext_files}
