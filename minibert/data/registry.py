"""Every dataset of the course as plain data: its files, their sha256, its licence, where it comes from.

The registry only describes; `fetching` reads it to fill the local layout (`layout`).
"""
from __future__ import annotations

from urllib.parse import quote

from . import nltk_corpora, wikipedia_shards


def _github(repo: str, commit: str, path: str) -> str:
    """A raw file at a fixed commit: the bytes behind the URL can never change."""
    return f"https://raw.githubusercontent.com/{repo}/{commit}/{quote(path)}"


def _texts(digests: dict[str, str]) -> dict[str, str]:
    """The files of a many-document corpus, one text per document: {stem: sha256} -> {stem.txt: sha256}."""
    return {f"{stem}.txt": digest for stem, digest in digests.items()}


_UD = ("UniversalDependencies/UD_English-EWT", "6d4e3e2d515c3da8dcb579bb437a62a2569f4c88",
       "81526baab558679e21e3cbdb6a021759d23e1ae8")
_GAP = ("google-research-datasets/gap-coreference", "da30315e77bfda9095cdb8b03203d58abeef90b2")
_WIKITEXT = ("pytorch/examples", "d5678bc8ac0cdd79dbd5e44d4130271018bcec4e",
             "word_language_model/data/wikitext-2/")
_NLTK_DATA = "nltk/nltk_data"
_SNLI = ("uclnlp/inferbeddings", "2002efc5be0169ee2674475e7dd9283ef22596e4")
_CONLL2003 = ("synalp/NER", "4282fda8f57feffa5788a67ba453dab7c1597903")
_WNUT17 = "leondz/emerging_entities_17"  # the WNUT-17 organisers' repo; each file pinned below


def _glue(path: str) -> str:
    """A file of an unmodified GLUE download (glue_data/), the one full copy found on GitHub."""
    return _github("F0restL1n/BERT", "03e1106d3656e7fd111803077af70ef6fcce505b", "glue_data/" + path)

# file: (GitHub repo, path in the repo, commit, sha256). Project Gutenberg's own GitHub mirror
# (gutenbergbooks) where it has the book, else GITenberg; renamed NLTK-style author-title.txt.
_GUTENBERG_MORE = {
    "shelley-frankenstein.txt": (
        "gutenbergbooks/84", "84-0.txt", "8bd92d5ea00b020a3b1224f3558019e5b4024f94",
        "f572837d92b31a857df4f6d0612e54f4bd8003d134367ae6a35ef444b9a8336b"),
    "doyle-sherlock_holmes.txt": (
        "gutenbergbooks/1661", "1661-0.txt", "376014745d5384398cb3041740bebd617cd23875",
        "e21895308fe6da6919abc53e2cf77d81f914887897546153cc5d49b2eadefe50"),
    "austen-pride.txt": (
        "gutenbergbooks/1342", "1342-0.txt", "041e520899f9a02af517d6cb253bc1fdfbf923e2",
        "86dab871eec9c0cef97f4cb6313f86c6cc48f6f7809534e65cd3f1c1d486d247"),
    "stevenson-treasure_island.txt": (
        "gutenbergbooks/120", "120-0.txt", "e89155f2bb5ead1c0007ec1abcf9008fbfe0e40e",
        "26bbda47e0066a884b1706e2b1bf7bc4b427f0889c47a4b2511274b3cff145d3"),
    "thoreau-walden.txt": (
        "gutenbergbooks/205", "205-0.txt", "f60bf200e67773ef3fb31446d447c070e42b9e9a",
        "da5a69cc0ea653779939362bb1a4dfc621ce54909a933016b6671f59ed72ba48"),
    "fitzgerald-gatsby.txt": (
        "gutenbergbooks/64317", "64317-0.txt", "653801a8485640c1c44ae5cc55ebf4f198766419",
        "4a1d4acb31593be9582b392572b08f7aa9f5ee0587ad50b2a0adbcc3712a951a"),
    "stevenson-jekyll_hyde.txt": (
        "gutenbergbooks/43", "43-0.txt", "80805b3b9520b27bbdbe9af29347f409331ecea9",
        "afe16ff5b3645124f24e9dc6a7ab4dbc487d688b5f07b9ae71685101a5b05065"),
    "london-call_of_the_wild.txt": (
        "gutenbergbooks/215", "215-0.txt", "f33202980b37d78635543c942a997e63903e6efc",
        "d4833aa8bcfcbe2512fde65ebdbbbb617b05a6bf0fb4c84c74d07f6cf601a3dc"),
    "twain-tom_sawyer.txt": (
        "gutenbergbooks/74", "74-0.txt", "972a29e29e34eb11bb645cc36954600c1bf6c26a",
        "fe74f3e43a7c0a0d0189b40ce966ce73795559b63076ccc0ea2e8ba2b9a9b213"),
    "conrad-heart_of_darkness.txt": (
        "gutenbergbooks/219", "219-0.txt", "e8147aab7c505f5d4797dace0e0f4756e1e1e7be",
        "56e2c3f429ebc19aa5bfb837a4e0bbe73263f5b742e7d14ec445540baf88a729"),
    "russell-problems_of_philosophy.txt": (
        "gutenbergbooks/5827", "5827-0.txt", "f6ee34671a344cf9a68e8871c68d715f8a9c451a",
        "75d47a4099ae2260c60c3ac9c086a829b85ec1add7b112538c56a1f322175483"),
    "franklin-autobiography.txt": (
        "gutenbergbooks/20203", "20203-0.txt", "8884c28fb94fb345f0abcc88dac82f41c412d19e",
        "b8b1db570c1fb6f26b81d146744b282863989369518132f276d64bf65c5dd1d9"),
    "swift-gulliver.txt": (
        "gutenbergbooks/829", "829-0.txt", "6275703e86512dc829eac1be52b009f606817ed2",
        "1f67774a12b7132438f53c57057e91f2c786e346fb3eeb238aabc0c31bb3244f"),
    "dickens-oliver_twist.txt": (
        "gutenbergbooks/730", "730-0.txt", "032dbf63ed9fefb297d2a06772255b69ef7ce1af",
        "ed6843e69f29aee6606a1fcdeae401d9c6131b2a7f308b912ffa789dbdcc30f5"),
    "hamilton_madison_jay-federalist.txt": (
        "GITenberg/The-Federalist-Papers_1404", "1404.txt", "9f195e5db037899e98e76add49651fdf697b8107",
        "64dd04d805964a7c8f946072fcc8ba11d01613c8e6faf908511a28930dcb28e1"),
    "darwin-origin_of_species.txt": (
        "GITenberg/The-Origin-of-Species-by-Means-of-Natural-Selection--13-Or-the-Preservation"
        "-of-Favoured-Races-__2009",
        "2009.txt", "4481aa7f4922badb22d5dc00a5f474ef6d91ef12",
        "dd54ea57361cddcb7a73f126a8ae557f34515519ca84c73517820ab214c8b761"),
    "dickens-tale_of_two_cities.txt": (
        "GITenberg/A-Tale-of-Two-Cities_98", "98.txt", "0f6111bc7237af7375295ec1754c2e57e19f67f1",
        "e4733dca6c496f6b21f38ef270bbdb88a2243a57690494f3ba84fb3fd8708a12"),
    "stoker-dracula.txt": (
        "GITenberg/Dracula_345", "345.txt", "5216d6ea255fbf8966426a160b68251b18f16907",
        "c802711470ddb2aaca81432fc101ed29c154e7c3d32df4172478695c33f68eae"),
}

# name -> plain data. "files" maps each file to its sha256 (every file has one, a tested promise);
# "online_extras" are files only the online route brings (too big for the mirror). The online route
# is exactly one of: "hub" (a Hub dataset rebuilt into the canonical files), "hf_repo" (files of a
# Hub model repo), "zip" (an archive to extract), "urls" (one URL per file).
DATASETS: dict[str, dict] = {
    "sst2": {
        "description": "SST-2 (GLUE): movie-review phrases labelled negative 0 / positive 1",
        "licence": "none stated (SST via GLUE)",
        "source": "Hub nyu-mll/glue, config sst2",
        "files": {"train.tsv": "48eac26399f8456935f81dd9e3a745c1430adb6c62e233ccfe22db4a0d15d1d1",
                  "dev.tsv": "54a9c12c77e402fc14d6a66a506f24d999f596b0176eb777c972cccc2f9cc4b0",
                  "test.tsv": "69a938605609b3e6663b4487918fe1565eb293734e6e520d0366d1d412fd2a13"},
        "hub": ("nyu-mll/glue", "sst2"),
    },
    "squad_v1.1": {
        "description": "SQuAD v1.1: questions on Wikipedia paragraphs, answers are spans",
        "licence": "CC BY-SA 4.0",
        "source": "Hub rajpurkar/squad",
        "files": {"dev-v1.1.json": "95aa6a52d5d6a735563366753ca50492a658031da74f301ac5238b03966972c9"},
        "online_extras": ["train-v1.1.json"],
        "hub": ("rajpurkar/squad", None),
    },
    "mrpc": {
        "description": "MRPC (GLUE): news sentence pairs, paraphrase 1 or not 0; GLUE's dev pairs in dev_ids",
        "licence": "Microsoft Research Shared Source, non-commercial",
        "source": "github.com/F0restL1n/BERT glue_data/MRPC (SentEval's copy of Microsoft's release)",
        "files": {
            "msr_paraphrase_train.txt": "60a9b09084528f0673eedee2b69cb941920f0b8cd0eeccefc464a98768457f89",
            "msr_paraphrase_test.txt": "a04e271090879aaba6423d65b94950c089298587d9c084bf9cd7439bd785f784",
            "dev_ids.tsv": "971d7767d81b997fd9060ade0ec23c4fc31cbb226a55d1bd4a1bac474eb81dc7",
            "LICENSE-MSR-SSLA.htm": "2d84356e4c1d0db09fa338ad7100ac56843c4ddd3d152c34130a6069f9f914c0"},
        "urls": {**{f: _glue("MRPC/" + f)
                    for f in ("msr_paraphrase_train.txt", "msr_paraphrase_test.txt", "dev_ids.tsv")},
                 # the licence travels with the data; it sits beside Microsoft's installer there
                 "LICENSE-MSR-SSLA.htm": _github("Nstats/my_bert", "733d79335044b1b7eabb5b47a0eae0cd621dadc0",
                                                 "data/MRPC/Microsoft Shared Source License.htm")},
    },
    "stsb": {
        "description": "STS-B (GLUE): sentence pairs scored 0-5 for similarity; the test file has scores",
        "licence": "scores CC BY-SA 4.0; sentences keep their sources' terms (LICENSE.txt)",
        "source": "github.com/F0restL1n/BERT glue_data/STS-B",
        "files": {"train.tsv": "41c4d978b6162abdcada7e49a982211954cca5459c228db478af333124b257a2",
                  "dev.tsv": "fe7dc0632a5033562f3cadff991f6e8d9b9b6311861660e78c3c82eb7db67f59",
                  "sts-test.tsv": "affe45928a66ee5a708531233c95b7dacbbdc57f974f002a3d32ea0180cf816a",
                  "LICENSE.txt": "3dfc3217395f8c5dd05c5f8995f25fe2f8fd258e6dd770b3de480749caee8c70",
                  "readme.txt": "e9488363d211c32ca5e912954f16eb9233cfed1b5b4b0475d0d812d35d7c8ef1"},
        "urls": {**{f: _glue("STS-B/" + f) for f in ("train.tsv", "dev.tsv", "LICENSE.txt", "readme.txt")},
                 "sts-test.tsv": _glue("STS-B/original/sts-test.tsv")},  # GLUE's copy of sts-test.csv
    },
    "rte": {
        "description": "RTE (GLUE): premise / hypothesis pairs, entailment or not_entailment",
        "licence": "none stated (RTE challenges via GLUE)",
        "source": "github.com/F0restL1n/BERT glue_data/RTE",
        "files": {"train.tsv": "41e3a9b063433392343fad9e962cf2f58b681c78d8f71592f4186f0837246c5c",
                  "dev.tsv": "80230dfa1347282e7b532b06a1004a76a710087541189bf874223ddf0e3819fb"},
        "urls": {f: _glue("RTE/" + f) for f in ("train.tsv", "dev.tsv")},
    },
    "qnli": {
        "description": "QNLI (GLUE) dev: does the sentence answer the question? From SQuAD v1.1 dev",
        "licence": "CC BY-SA 4.0 (SQuAD's text; GLUE states none)",
        "source": "github.com/F0restL1n/BERT glue_data/QNLI",
        "files": {"dev.tsv": "ac19409dcb04631eaaa094bdebdcf621086bc352503dfb6a1a648b614986f4fd"},
        "urls": {"dev.tsv": _glue("QNLI/dev.tsv")},
    },
    "snli": {
        "description": "SNLI 1.0 dev and test: caption premise / hypothesis, 3-way NLI, gzipped JSON Lines",
        "licence": "CC BY-SA 4.0",
        "source": "github.com/uclnlp/inferbeddings data/snli",
        # Kept gzipped, as the source holds them: the digests are of the .gz bytes that fetch writes and
        # checks. Unzipped, they are the published snli_1.0_{dev,test}.jsonl (digests in data/README.md).
        "files": {"snli_1.0_dev.jsonl.gz": "e5cfcc71b4846c40e06bae364a13312adeb434884e9a7cedf67037bdd212e39d",
                  "snli_1.0_test.jsonl.gz": "ef5f0721f18e6aafd80f0d67aa2ef9784277aa08ba6a582c03fc381367282ac5"},
        "urls": {f: _github(*_SNLI, "data/snli/" + f) for f in ("snli_1.0_dev.jsonl.gz", "snli_1.0_test.jsonl.gz")},
    },
    "conll2003": {
        "description": "CoNLL-2003 English NER (PER, LOC, ORG, MISC), IOB1 tags; testa = dev, testb = test",
        "licence": "none stated: Reuters text, research use; redistribution not clearly permitted",
        "source": "github.com/synalp/NER corpus/CoNLL-2003",
        "files": {"eng.train": "eac0822f501353f265383ddf1edb0dcd42a1b6eefd3e383d7074db98c38eb41c",
                  "eng.testa": "aedc4ccbd1ae9795feaa0e86fe72d195b0258abed9d705b630d1c889276fac1e",
                  "eng.testb": "0632f32c090ef31c223135b7fee3187a7cf8e65c4015c7866bb7783428cdd9a6"},
        "urls": {f: _github(*_CONLL2003, "corpus/CoNLL-2003/" + f) for f in ("eng.train", "eng.testa", "eng.testb")},
    },
    "wnut17": {
        "description": "WNUT-17 emerging entities: NER on social-media text, 6 types, IOB2 tags",
        "licence": "CC BY 4.0",
        "source": "github.com/leondz/emerging_entities_17",
        "files": {"wnut17train.conll": "731820e13f71af324c6b55a1575ec2ce59fbaa2a0806f8f0400b98d56cd6a7a5",
                  "emerging.dev.conll": "e053b752b8155113ca66e7db08af5f2f5f43ab993694e4774f1ec5bad42312d8",
                  "emerging.test.annotated": "2aa79b764e56ec9264a1b30fdd9b70195bd00ff400b62edd8f399d5f13c178f0"},
        "urls": {f: _github(_WNUT17, commit, f) for f, commit in (
            ("wnut17train.conll", "e7d20800af24ee81b085d89f8229edfaf326941e"),
            ("emerging.dev.conll", "e0a5a823911dc5301947c3c7a1354355a0012181"),  # "Fixed BIO error"
            ("emerging.test.annotated", "8c28a33c4ec37e61ce1b3d55bc546a11fdbfbcc9"))},
    },
    "wikitext2_raw": {
        "description": "WikiText-2 raw: Wikipedia Good/Featured articles, no <unk>",
        "licence": "CC BY-SA 3.0",
        "source": "Hub Salesforce/wikitext, config wikitext-2-raw-v1",
        "files": {"wiki.valid.raw": "4cd0f6876d07a413aa911261ff6d363c72d757d47f0fdd6015702014c89cb9c7",
                  "wiki.test.raw": "173c87a53759e0201f33e0ccf978e510c2042d7f2cb78229d9a50d79b9e7dd08"},
        "online_extras": ["wiki.train.raw"],
        "hub": ("Salesforce/wikitext", "wikitext-2-raw-v1"),
    },
    "wikipedia_2015": {
        "description": "English Wikipedia 2015, 7,980 articles (16.3M words) in 100 WikiExtractor shards",
        "licence": "CC BY-SA 3.0 (attribution: Wikipedia contributors; each <doc>'s url is its page)",
        "source": "github.com/jason-feng/wikiVisual text/ at 1c0fac92 (every 4th shard)",
        "files": wikipedia_shards.SHA256,
        "urls": {f: _github(wikipedia_shards.SOURCE[0], wikipedia_shards.SOURCE[1], wikipedia_shards.SOURCE[2] + f)
                 for f in wikipedia_shards.SHA256},
    },
    "wikitext2": {
        "description": "WikiText-2 tokenized: the same lines with rare words as <unk>",
        "licence": "CC BY-SA 3.0",
        "source": "github.com/pytorch/examples word_language_model/data/wikitext-2",
        "files": {"valid.txt": "f0737ed31fc1329026e95cb8b98e19c2a182c39c240ab909dc31abf2f8af58e8",
                  "test.txt": "d790b833ef8cf03a90db7bf1271b7520b83c45ce07ba3c1a9699df81e239eca0"},
        "online_extras": ["train.txt"],
        "urls": {f: _github(_WIKITEXT[0], _WIKITEXT[1], _WIKITEXT[2] + f)
                 for f in ("train.txt", "valid.txt", "test.txt")},
    },
    "ud_english_ewt": {
        "description": "UD English EWT v2.16: dependency trees (obj, det, nsubj ...), CoNLL-U",
        "licence": "CC BY-SA 4.0",
        "source": "github.com/UniversalDependencies/UD_English-EWT",
        "files": {
            "en_ewt-ud-dev.conllu": "531a54ff90d6ab12201c5a50c3e78e6ddac4de69abc4bce5d275d3cd29efe2b6",
            "en_ewt-ud-test.conllu": "e266e515a0a7547657ed3d90d9ba46487d6bd251f27ad4269d4e8a427c8555cd"},
        "urls": {"en_ewt-ud-dev.conllu": _github(_UD[0], _UD[1], "en_ewt-ud-dev.conllu"),
                 "en_ewt-ud-test.conllu": _github(_UD[0], _UD[2], "en_ewt-ud-test.conllu")},
    },
    "gap_coreference": {
        "description": "GAP: gendered pronoun / name pairs, coreferent or not, on Wikipedia text",
        "licence": "Apache-2.0",
        "source": "github.com/google-research-datasets/gap-coreference",
        "files": {"gap-development.tsv": "b9a01434fcf58d8c2f9bc762480c27e58ce466cf1ffe8b09cfecbc7a20d2d634",
                  "gap-test.tsv": "1c35e36d5b14f6313ec3f6cd67b275de282595dd59e59390e00cfff9897a6819",
                  "gap-validation.tsv": "2d784f66b390404f554704b9aef6dcde8845e79dda9886b8391cf7e9a24fdb98"},
        "urls": {f: _github(*_GAP, f) for f in ("gap-development.tsv", "gap-test.tsv", "gap-validation.tsv")},
    },
    "gutenberg": {
        "description": "NLTK's 15 Project Gutenberg books (Austen, Carroll, Melville ...), 2008 selection",
        "licence": "public domain",
        "source": "github.com/nltk/nltk (history) nltk_data/corpora/gutenberg.zip",
        "files": _texts(nltk_corpora.GUTENBERG),
        "zip": _github("nltk/nltk", "583117dd80c39f604910ead218cab30da18a8d9a",
                       "nltk_data/corpora/gutenberg.zip"),
    },
    "gutenberg_more": {
        "description": "18 more public-domain books (Shelley, Doyle, Darwin, the Federalist ...)",
        "licence": "public domain (US)",
        "source": "Project Gutenberg's GitHub mirrors: github.com/gutenbergbooks and GITenberg",
        "files": {name: sha for name, (*_, sha) in _GUTENBERG_MORE.items()},
        "urls": {name: _github(repo, commit, file)
                 for name, (repo, file, commit, _) in _GUTENBERG_MORE.items()},
    },
    "state_union": {
        "description": "State of the Union addresses 1945-2006, one per file (NLTK)",
        "licence": "public domain",
        "source": "github.com/nltk/nltk_data packages/corpora/state_union.zip",
        "files": _texts(nltk_corpora.STATE_UNION),
        "zip": _github(_NLTK_DATA, "5f09e470fe339e1a119dd174ca284129a3c7a5bb",
                       "packages/corpora/state_union.zip"),
    },
    "inaugural": {
        "description": "US presidential inaugural addresses 1789-2021, one per file (NLTK)",
        "licence": "public domain",
        "source": "github.com/nltk/nltk_data packages/corpora/inaugural.zip",
        "files": _texts(nltk_corpora.INAUGURAL),
        "zip": _github(_NLTK_DATA, "c38fae336d2400f1d7bf5754d2c13cba832e64d8",
                       "packages/corpora/inaugural.zip"),
    },
    "bert_vocab": {
        "description": "bert-base-uncased WordPiece vocabulary, 30,522 tokens, one per line",
        "licence": "Apache-2.0",
        "source": "Hub google-bert/bert-base-uncased vocab.txt",
        "files": {"vocab.txt": "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"},
        "hf_repo": "google-bert/bert-base-uncased",
    },
}


def dataset_spec(name: str) -> dict:
    """The registry entry of ``name``, or an error that lists the known datasets."""
    if name not in DATASETS:
        raise ValueError(f"unknown dataset {name!r}; known datasets: {', '.join(DATASETS)}")
    return DATASETS[name]
