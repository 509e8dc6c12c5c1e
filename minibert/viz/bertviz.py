"""bertviz's head, model and neuron views (Vig 2019) for minibert models, drawn with no network.

bertviz's HTML loads require.js, and through it d3 and jQuery, from a CDN, so an offline classroom or
a firewalled lab sees an empty cell (bertviz issues #26, #53, #63). Here bertviz's own HTML and
JavaScript run with those libraries inlined instead: d3 5.7.0, the version bertviz asks for, from the
``mpld3`` package, and jQuery 3.7.1 from ``XStatic-jQuery``, both pinned course dependencies. A
two-line stand-in for require.js hands them to bertviz's code inside one closure, so a page with its
own require.js or jQuery (the classic notebook) keeps them as they were.

The neuron view shows how each query meets each key (q · k / √d, then softmax), so it needs every
head's queries and keys; bertviz gets them from its own patched copy of BERT, here forward hooks on
the ``query`` and ``key`` projections of the minibert model capture them.

Each view returns an ``IPython.display.HTML`` that shows itself as the last line of a cell
(``html_action="view"`` displays it at once, as bertviz does). The libraries make each view about
0.3 MB bigger; ``offline=False`` gives bertviz's HTML as it ships, which needs the internet. Notebooks
that store these outputs must be trusted for the scripts to run, as with bertviz itself.
"""
from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import bertviz
import bertviz.neuron_view
import torch
from IPython.display import HTML, display

from ..attention import BertSelfAttention
from ..modes import eval_mode
from .attention import check_index, check_text_fits, stack_attentions

CDN_REQUIRE_JS = '<script src="https://cdnjs.cloudflare.com/ajax/libs/require.js/2.3.6/require.min.js"></script>'
SCRIPT = re.compile(r'<script type="text/javascript">(.*?)</script>', re.S)


def head_view(attention, tokens, sentence_b_start=None, layer=None, heads=None, include_layers=None,
              offline=True, html_action="return"):
    """One layer at a time: a line from each token to each token it attends to, one colour per head.

    ``attention`` is the model's ``out.attentions`` for one sequence or the (L, nh, T, T) tensor of
    `minibert.viz.attention_for`: ``head_view(*attention_for(model, tokenizer, "The cat sat."))``.
    """
    _check_action(html_action)
    attention, include_layers = _for_bertviz(attention, tokens, sentence_b_start, include_layers)
    nh = attention[0].size(1)
    if layer is not None and check_index("layer", layer, len(attention)) not in include_layers:
        raise ValueError(f"layer {layer} is not among include_layers {include_layers}")
    heads = None if heads is None else [check_index("head", head, nh) for head in heads]
    view = bertviz.head_view(attention, tokens, sentence_b_start, layer=layer, heads=heads,
                             include_layers=include_layers, html_action="return")
    return _finish(view.data, offline, html_action)


def model_view(attention, tokens, sentence_b_start=None, include_layers=None, include_heads=None,
               display_mode="dark", offline=True, html_action="return"):
    """Every layer (rows) and head (columns) as a thumbnail of lines; click one to enlarge it."""
    _check_action(html_action)
    attention, include_layers = _for_bertviz(attention, tokens, sentence_b_start, include_layers)
    nh = attention[0].size(1)
    if include_heads is not None:
        include_heads = [check_index("head", head, nh) for head in include_heads]
    view = bertviz.model_view(attention, tokens, sentence_b_start, display_mode=display_mode,
                              include_layers=include_layers, include_heads=include_heads, html_action="return")
    return _finish(view.data, offline, html_action)


def neuron_view(model, tokenizer, sentence_a, sentence_b=None, layer=None, head=None, display_mode="dark",
                offline=True, html_action="return"):
    """One head's computation: hover a token on the left to see its attention, click its ⊕ to see the
    query and key vectors, their elementwise product, q · k / √d and the softmax."""
    _check_action(html_action)
    cfg = model.config
    layer = None if layer is None else check_index("layer", layer, cfg.num_hidden_layers)
    head = None if head is None else check_index("head", head, cfg.num_attention_heads)
    check_text_fits(model, tokenizer, sentence_a, sentence_b or None)
    view = bertviz.neuron_view.show(QueriesAndKeys(model), "bert", tokenizer, sentence_a, sentence_b,
                                    display_mode=display_mode, layer=layer, head=head, html_action="return")
    return _finish(view.data, offline, html_action)


class QueriesAndKeys:
    """Stands in for bertviz's patched BERT: runs a minibert model and returns, per layer, the attention
    with the queries and keys that made it, as bertviz's neuron view reads them."""

    def __init__(self, model):
        self.model = model
        self.attentions = [m for m in model.modules() if isinstance(m, BertSelfAttention)]

    def eval(self):
        return self  # __call__ switches dropout off for the call only

    def __call__(self, input_ids, token_type_ids=None):
        captured, hooks = {}, []
        for i, attention in enumerate(self.attentions):
            for name in ("query", "key"):
                hooks.append(getattr(attention, name).register_forward_hook(_keep(captured, (i, name))))
        device = next(self.model.parameters()).device
        try:
            with eval_mode(self.model), torch.no_grad():
                out = self.model(input_ids.to(device), token_type_ids=None if token_type_ids is None
                                 else token_type_ids.to(device), output_attentions=True)
        finally:
            for hook in hooks:
                hook.remove()
        layers = [{"attn": _compact(probs, 4),  # (1, nh, T, T)
                   "queries": _compact(attention.split_heads(captured[i, "query"]), 3),  # (1, nh, T, hs)
                   "keys": _compact(attention.split_heads(captured[i, "key"]), 3)}
                  for i, (attention, probs) in enumerate(zip(self.attentions, out.attentions))]
        return (layers,)  # bertviz reads the last element of the model's output


def _keep(captured: dict, key):
    def hook(module, args, output):
        captured[key] = output
    return hook


def _compact(x: torch.Tensor, decimals: int) -> torch.Tensor:
    """Rounded float64, so that bertviz's JSON holds 0.1234 rather than float32's 0.12340000271797180."""
    return x.detach().cpu().double().round(decimals=decimals)


def _for_bertviz(attention, tokens, sentence_b_start, include_layers):
    """Check the inputs and give bertviz what it takes: one (1, nh, T, T) tensor per layer."""
    attention = stack_attentions(attention, tokens)
    L, _, T, _ = attention.shape
    if sentence_b_start is not None and not 0 < sentence_b_start < T:
        raise ValueError(f"sentence_b_start must be the index of the first token of segment B, within 1 to "
                         f"{T - 1}, got {sentence_b_start}")
    layers = list(range(L)) if include_layers is None else [check_index("layer", i, L) for i in include_layers]
    return [layer[None] for layer in _compact(attention, 4)], layers


def _check_action(html_action: str) -> None:
    if html_action not in ("return", "view"):
        raise ValueError(f"html_action must be 'return' (give back the HTML) or 'view' (display it now), "
                         f"got {html_action!r}")


def _finish(view: str, offline: bool, html_action: str):
    page = HTML(inline_libraries(view) if offline else view)
    if html_action == "view":
        display(page)
        return None
    return page


def inline_libraries(view: str) -> str:
    """bertviz's HTML with d3 and jQuery inlined in place of the CDN's require.js: it draws offline."""
    if CDN_REQUIRE_JS not in view:
        raise RuntimeError("bertviz's HTML does not load require.js as minibert expects; the offline views "
                           "are made for bertviz 1.4.1, the course's pin (pip install bertviz==1.4.1)")
    scripts = SCRIPT.findall(view)
    markup = SCRIPT.sub("", view.replace(CDN_REQUIRE_JS, ""))
    # "</" in a script's text would end the script early; in JavaScript strings "<\/" means the same
    code = (_libraries() + "\n".join(scripts)).replace("</", "<\\/")
    return f"{markup}<script>(function () {{\n{code}\n}})();</script>"


@cache
def _libraries() -> str:
    """d3 and jQuery as inline JavaScript, defined in a private ``lib`` object and not on ``window``."""
    try:
        import mpld3.urls
        import xstatic.pkg.jquery
    except ImportError as error:
        raise ImportError("the offline bertviz views inline d3 from the mpld3 package and jQuery from "
                          "XStatic-jQuery: install the course's pins (pip install -e .), or pass offline=False "
                          "to load them from the internet") from error
    d3 = Path(mpld3.urls.D3_LOCAL).read_text(encoding="utf-8")
    jquery = (Path(xstatic.pkg.jquery.BASE_DIR) / "jquery.min.js").read_text(encoding="utf-8")
    return f"""
var define, module, exports;  // hidden: the bundles below must not register with a page's AMD loader
var lib = {{}};
(function () {{
{d3}
}}).call(lib);  // d3 puts itself on `this`
{jquery}
lib.jquery = window.jQuery.noConflict(true);  // jQuery puts itself on window: take it, give back the page's
var require = {{config: function () {{}}}};
function requirejs(names, factory) {{ factory.apply(null, names.map(function (name) {{ return lib[name]; }})); }}
"""
