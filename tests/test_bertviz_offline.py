"""bertviz's views of a minibert model draw in a browser that has no network.

Each view is written to a file and opened in headless Chromium with every host unresolvable and a
dead proxy; the screenshot must show coloured attention lines. The same views as bertviz ships them
(d3 and jQuery through require.js from a CDN) stay empty there, which shows the check can fail.
Chromium comes from Debian's packages: installed here when missing and this process may (root and
apt-get), otherwise the browser tests are skipped with the command to run.
"""
import re
import subprocess

import numpy as np
import pytest
import system_programs
import torch
from IPython.display import HTML
from offline import MINILM
from PIL import Image

from minibert import BertConfig, BertModel, BertTokenizer
from minibert.viz import attention_for
from minibert.viz.bertviz import QueriesAndKeys, head_view, inline_libraries, model_view, neuron_view

SENTENCE = "The cat sat on the mat because it was tired."
WINDOW = (1100, 900)
CONTROLS_HEIGHT = 60  # the dropdowns and head swatches above the drawing


@pytest.fixture(scope="module")
def minilm():
    return BertModel.from_pretrained(MINILM), BertTokenizer.from_pretrained(MINILM)


@pytest.fixture(scope="module")
def tiny():
    words = "the cat sat on mat it was tired".split()
    tokenizer = BertTokenizer({t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + words)})
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                        intermediate_size=64, max_position_embeddings=16)
    return BertModel(config), tokenizer


@pytest.fixture(scope="session")
def chromium():
    """Chromium's path; installed from Debian's packages when missing and permitted (root and apt-get)."""
    found, why_not = system_programs.program("chromium", "chromium")
    return found or pytest.skip(f"the offline rendering tests need Chromium: {why_not}")


def offline_browser(chromium, tmp_path, html: str, *output: str) -> subprocess.CompletedProcess:
    """Open ``html`` in headless Chromium that can reach no host: names do not resolve, the proxy is dead."""
    page = tmp_path / "view.html"
    page.write_text(html, encoding="utf-8")
    command = [chromium, "--headless", "--disable-gpu", "--no-sandbox", "--hide-scrollbars", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", f"--user-data-dir={tmp_path / 'profile'}",
               "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=http://127.0.0.1:9",
               f"--window-size={WINDOW[0]},{WINDOW[1]}", "--virtual-time-budget=5000", *output, page.as_uri()]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)


def coloured_pixels(chromium, tmp_path, html: str) -> int:
    """Pixels of the drawing area that are neither white, black nor grey: attention lines in head colours."""
    png = tmp_path / "view.png"
    offline_browser(chromium, tmp_path, html, f"--screenshot={png}")
    rgb = np.asarray(Image.open(png).convert("RGB"), dtype=np.int16)[CONTROLS_HEIGHT:]
    return int(((rgb.max(-1) - rgb.min(-1)) >= 30).sum())


def views(model, tokenizer, offline: bool) -> dict[str, HTML]:
    sample = attention_for(model, tokenizer, SENTENCE)
    sharpest = int(sample.attentions[1].amax(-1).mean(-1).argmax())  # bold lines: one head, all twelve blend to grey
    return {"head": head_view(*sample, layer=1, heads=[sharpest], offline=offline),
            "model": model_view(*sample, offline=offline),
            "neuron": neuron_view(model, tokenizer, SENTENCE, offline=offline)}


@pytest.fixture(scope="module")
def offline_views(minilm):
    return views(*minilm, offline=True)


@pytest.mark.parametrize("name", ["head", "model", "neuron"])
def test_view_draws_attention_with_no_network(chromium, tmp_path, offline_views, name):
    html = offline_views[name].data
    assert not re.search(r"<script[^>]*\ssrc=", html), "the page must load nothing"
    assert coloured_pixels(chromium, tmp_path, html) > 1000


@pytest.mark.parametrize("name", ["head", "model", "neuron"])
def test_cdn_version_of_the_view_is_empty_with_no_network(chromium, tmp_path, minilm, name):
    """bertviz's own HTML loads its libraries from a CDN: offline it draws nothing, and the check above sees it."""
    html = views(*minilm, offline=False)[name].data
    assert "cdnjs.cloudflare.com/ajax/libs/require.js" in html
    assert coloured_pixels(chromium, tmp_path, html) < 50


def test_page_keeps_its_own_jquery_and_amd_loader(chromium, tmp_path, offline_views):
    """In the classic notebook the page has require.js and jQuery: the view must neither use nor replace them."""
    page = """<script>
      window.jQuery = window.$ = "page jQuery"; window.require = window.requirejs = "page require";
      window.define = function () { throw new Error("the view called the page's AMD define"); };
      window.define.amd = {};
    </script>""" + offline_views["head"].data + """<script>
      document.body.insertAdjacentHTML("beforeend", "<p id=check>" + [window.$, window.jQuery, window.require,
        typeof window.d3, document.querySelectorAll("svg line").length].join("|") + "</p>");
    </script>"""
    dom = offline_browser(chromium, tmp_path, page, "--dump-dom").stdout
    dollar, jquery, require, d3, lines = re.search(r'<p id="check">(.*?)</p>', dom).group(1).split("|")
    assert (dollar, jquery, require, d3) == ("page jQuery", "page jQuery", "page require", "undefined")
    assert int(lines) > 100, "and it still draws"


def test_neuron_view_queries_and_keys_make_the_attention(tiny):
    """softmax(q·kᵀ/√d) from the captured queries and keys gives the attention the view shows."""
    model, tokenizer = tiny
    model.train()
    enc = tokenizer("the cat sat on the mat", return_tensors="pt")
    (layers,) = QueriesAndKeys(model)(enc["input_ids"], enc["token_type_ids"])
    assert model.training and len(layers) == 2
    for layer in layers:
        q, k = layer["queries"], layer["keys"]
        assert q.shape == k.shape == (1, 4, 8, 8)  # (1, nh, T, hs)
        recomputed = torch.softmax(q @ k.transpose(-2, -1) / 8 ** 0.5, dim=-1)
        torch.testing.assert_close(recomputed, layer["attn"], atol=2e-3, rtol=0)
    assert not any(m._forward_hooks for m in model.modules()), "the hooks are removed"


def test_views_return_html_or_display_it(tiny, capsys):
    model, tokenizer = tiny
    sample = attention_for(model, tokenizer, "the cat sat", "it was tired")
    page = head_view(*sample)
    assert isinstance(page, HTML) and '<select id="filter">' in page.data  # sentence A / B filters
    assert head_view(*sample, html_action="view") is None
    assert "IPython.core.display.HTML" in capsys.readouterr().out
    assert not re.search(r"\d\.\d{5}", head_view(*sample, offline=False).data), "weights are sent rounded"
    assert neuron_view(model, tokenizer, "the cat", "it was", layer=1, head=3).data.count("window.bertviz_params") == 2


@pytest.mark.parametrize("call, message", [
    (lambda s, m, t: head_view(*s, layer=2), "layer 2 is out of range: the model has 2 layers, numbered 0 to 1"),
    (lambda s, m, t: head_view(*s, heads=[0, 4]), "head 4 is out of range: the model has 4 heads"),
    (lambda s, m, t: head_view(s.attentions, s.tokens[1:]), "covers 8 positions but 7 tokens were given"),
    (lambda s, m, t: model_view(*s, include_layers=[5]), "layer 5 is out of range"),
    (lambda s, m, t: model_view(s.attentions, s.tokens, 8), "sentence_b_start must be .* within 1 to 7"),
    (lambda s, m, t: neuron_view(m, t, "the cat", head=9), "head 9 is out of range"),
    (lambda s, m, t: neuron_view(m, t, " ".join(["the"] * 20)), "22 tokens long .* at most 16; shorten it"),
    (lambda s, m, t: head_view(*s, html_action="show"), "html_action must be 'return' .* or 'view'"),
])
def test_bad_input_says_what_to_do(tiny, call, message):
    model, tokenizer = tiny
    sample = attention_for(model, tokenizer, "the cat sat on the mat")
    with pytest.raises(ValueError, match=message):
        call(sample, model, tokenizer)


def test_inline_libraries_refuses_html_it_does_not_know():
    with pytest.raises(RuntimeError, match="bertviz 1.4.1"):
        inline_libraries("<div></div>")
