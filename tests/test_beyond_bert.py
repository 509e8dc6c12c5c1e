"""After BERT: ALBERT's parameter savings, distillation, head pruning and dynamic int8 quantisation."""
import json
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from minibert import BertConfig, BertForPreTraining, BertForSequenceClassification, BertModel, TrainConfig, Trainer
from minibert.compression.distillation import Distiller, distillation_loss, student_from_teacher
from minibert.compression.pruning import head_importance, least_important
from minibert.compression.quantization import latencies_ms, latency_ms, quantize_dynamic, size_mb

SMALL = dict(vocab_size=120, hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=64,
             max_position_embeddings=32)


def count(config: BertConfig) -> int:
    with torch.device("meta"):
        return BertModel(config).num_parameters()


def batch(seed=0, B=3, T=10, vocab=120):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, vocab, (B, T), generator=g)
    mask = torch.ones_like(ids)
    mask[-1, T // 2:] = 0
    return {"input_ids": ids, "attention_mask": mask, "labels": torch.arange(B) % 2}


# --- ALBERT ---------------------------------------------------------------------------------------

def test_albert_presets_have_the_papers_sizes():
    # ALBERT Table 1: BERT-base 108M, ALBERT-base 12M, large 18M, xlarge 60M (our counts include the pooler)
    assert 108e6 < count(BertConfig.from_preset("bert-base", vocab_size=30000)) < 110e6
    assert 11e6 < count(BertConfig.from_preset("albert-base")) < 12.5e6
    assert 17e6 < count(BertConfig.from_preset("albert-large")) < 18.5e6
    assert 58e6 < count(BertConfig.from_preset("albert-xlarge")) < 60.5e6


def test_factorised_embedding_saves_exactly_VxH_minus_VxE_plus_ExH():
    V, H, E, P = 120, 32, 8, 32
    bert, albert = BertConfig(**SMALL), BertConfig(**SMALL, embedding_size=E)
    # word, position and segment tables shrink from H to E wide, their LayerNorm too; E×H + H projection appears
    saved = (V + P + 2) * (H - E) + 2 * (H - E) - (E * H + H)
    assert count(bert) - count(albert) == saved


def test_shared_layers_store_one_layer_and_run_it_L_times():
    config = BertConfig(**SMALL, share_layers=True)
    model = BertModel(config).eval()
    assert count(BertConfig(**SMALL)) - count(config) == 2 * sum(p.numel() for p in model.encoder.layer[0].parameters())
    assert not any(".layer.1." in key for key in model.state_dict())
    x = batch()
    out = model(x["input_ids"], x["attention_mask"], output_hidden_states=True, output_attentions=True)
    assert len(out.hidden_states) == 4 and len(out.attentions) == 3
    by_hand = model.embeddings(x["input_ids"], torch.zeros_like(x["input_ids"]))
    mask = x["attention_mask"].bool()[:, None, None, :]
    for _ in range(3):
        by_hand = model.encoder.layer[0](by_hand, mask)[0]
    assert torch.allclose(out.last_hidden_state, by_hand, atol=1e-6)


def test_albert_model_trains_saves_and_loads(tmp_path):
    torch.manual_seed(0)
    config = BertConfig(**SMALL, embedding_size=8, share_layers=True)
    model = BertForPreTraining(config)
    assert model.cls.predictions.decoder.weight is model.bert.embeddings.word_embeddings.weight  # V × E, tied
    x = batch()
    out = model(x["input_ids"], labels=x["input_ids"], next_sentence_label=x["labels"])
    out.loss.backward()
    assert model.bert.encoder.embedding_hidden_mapping_in.weight.grad is not None
    model.save_pretrained(tmp_path)
    stored = json.loads((tmp_path / "config.json").read_text())
    assert stored["embedding_size"] == 8 and stored["share_layers"] is True
    loaded = BertForPreTraining.from_pretrained(tmp_path).eval()
    model.eval()
    assert torch.equal(loaded(x["input_ids"]).prediction_logits, model(x["input_ids"]).prediction_logits)


def test_plain_bert_config_json_has_no_albert_or_pruning_fields():
    data = BertConfig(**SMALL).to_dict()
    assert not {"embedding_size", "share_layers", "pruned_heads"} & set(data)


def test_bad_albert_and_pruning_settings_say_what_is_wrong():
    with pytest.raises(ValueError, match="embedding_size"):
        BertConfig(**SMALL, embedding_size=0)
    with pytest.raises(ValueError, match="every head"):
        BertConfig(**SMALL, pruned_heads={0: [0, 1, 2, 3]})
    with pytest.raises(ValueError, match="does not exist"):
        BertConfig(**SMALL, pruned_heads={5: [0]})
    with pytest.raises(ValueError, match="share_layers"):
        BertConfig(**SMALL, share_layers=True, pruned_heads={0: [0]})
    with pytest.raises(ValueError, match="unknown preset"):
        BertConfig.from_preset("albert-huge")


# --- head pruning ---------------------------------------------------------------------------------

def test_pruned_model_computes_what_the_model_with_those_heads_switched_off_computes(tmp_path):
    torch.manual_seed(0)
    model = BertModel(BertConfig(**SMALL)).eval()
    x = batch()
    for layer, heads in {0: [1, 2, 3], 2: [0]}.items():
        gate = torch.ones(4)
        gate[heads] = 0
        model.encoder.layer[layer].attention.self.head_gate = gate
    switched_off = model(x["input_ids"], x["attention_mask"]).last_hidden_state
    for layer in model.encoder.layer:
        layer.attention.self.head_gate = None
    before = model.num_parameters()
    model.prune_heads({0: [1, 3], 2: [0]})
    model.prune_heads({0: [2, 3]})  # numbered as in the unpruned model; 3 again changes nothing
    pruned = model(x["input_ids"], x["attention_mask"]).last_hidden_state
    assert torch.allclose(pruned, switched_off, atol=1e-6)
    hs, H = 8, 32
    assert before - model.num_parameters() == 4 * (3 * (H * hs + hs) + H * hs)  # Q, K, V rows and W_O columns
    assert model.config.pruned_heads == {0: [1, 2, 3], 2: [0]}
    model.save_pretrained(tmp_path)
    loaded = BertModel.from_pretrained(tmp_path).eval()
    assert torch.equal(loaded(x["input_ids"], x["attention_mask"]).last_hidden_state, pruned)
    with pytest.raises(ValueError, match="every head"):
        model.prune_heads({0: [0]})


def test_head_importance_is_the_gradient_of_the_loss_with_respect_to_a_head_gate():
    torch.manual_seed(0)
    model = BertForSequenceClassification(BertConfig(**SMALL, hidden_dropout_prob=0.0)).train()
    x = batch()
    scores = head_importance(model, [x], normalize=False)
    assert model.training and all(layer.attention.self.head_gate is None for layer in model.bert.encoder.layer)
    model.eval()
    eps = 1e-3
    for layer, head in [(0, 0), (1, 2), (2, 3)]:
        losses = []
        for sign in (1, -1):
            gate = torch.ones(4, dtype=torch.float64)
            gate[head] += sign * eps
            model.double().bert.encoder.layer[layer].attention.self.head_gate = gate
            losses.append(model(**x).loss.item())
            model.bert.encoder.layer[layer].attention.self.head_gate = None
        model.float()
        assert scores[layer, head].item() == pytest.approx(abs(losses[0] - losses[1]) / (2 * eps), rel=1e-3, abs=1e-6)


def test_least_important_heads_go_first_and_no_layer_is_emptied():
    importance = torch.tensor([[0.1, 0.2, 0.9, float("nan")], [0.05, 0.06, 0.07, 0.08]])
    assert least_important(importance, 0.0) == {}
    chosen = least_important(importance, 0.5)  # 7 heads alive -> 4 go
    assert chosen == {1: [0, 1, 2], 0: [0]}
    assert least_important(importance, 0.99) == {1: [0, 1, 2], 0: [0, 1]}  # one head left in each layer
    with pytest.raises(ValueError):
        least_important(importance, 1.0)


# --- distillation ---------------------------------------------------------------------------------

def test_distillation_loss_is_hintons_formula():
    g = torch.Generator().manual_seed(0)
    student, teacher = torch.randn(5, 3, generator=g), torch.randn(5, 3, generator=g)
    labels = torch.tensor([0, 2, 1, 1, 0])
    T, alpha = 3.0, 0.7
    p_t, p_s = (teacher / T).softmax(-1), (student / T).softmax(-1)
    kl = (p_t * (p_t.log() - p_s.log())).sum(-1).mean()
    expected = alpha * T * T * kl + (1 - alpha) * F.cross_entropy(student, labels)
    assert distillation_loss(student, teacher, labels, T, alpha).item() == pytest.approx(expected.item(), rel=1e-5)
    assert distillation_loss(teacher, teacher, None, T).item() == pytest.approx(0.0, abs=1e-6)
    with pytest.raises(ValueError, match="same shape"):
        distillation_loss(student, teacher[:, :2])


def test_student_from_teacher_keeps_the_chosen_layers():
    torch.manual_seed(0)
    teacher = BertForSequenceClassification(BertConfig(**SMALL)).eval()
    x = batch()
    student = student_from_teacher(teacher, [0, 2]).eval()
    assert student.config.num_hidden_layers == 2 and teacher.config.num_hidden_layers == 3
    assert torch.equal(student.bert.encoder.layer[1].output.dense.weight, teacher.bert.encoder.layer[2].output.dense.weight)
    whole = student_from_teacher(teacher, [0, 1, 2]).eval()
    assert torch.equal(whole(**x).logits, teacher(**x).logits)
    with pytest.raises(ValueError, match="layers"):
        student_from_teacher(teacher, [3])


def test_distiller_trains_the_student_and_leaves_the_teacher_alone():
    torch.manual_seed(0)
    teacher = BertForSequenceClassification(BertConfig(**SMALL))
    student = student_from_teacher(teacher, [1])
    frozen = {k: v.clone() for k, v in teacher.state_dict().items()}
    start = {k: v.clone() for k, v in student.state_dict().items()}
    data = [{k: v[0] for k, v in batch(seed=i, B=1).items()} | {"labels": torch.tensor(i % 2)} for i in range(16)]

    def collate(items):
        return {k: torch.stack([item[k] for item in items]) for k in items[0]}

    distiller = Distiller(student, teacher, temperature=2.0, alpha=0.5)
    Trainer(distiller, TrainConfig(max_steps=4, batch_size=4, lr=1e-3, progress=False), data, collate_fn=collate).fit()
    assert not teacher.training
    assert all(torch.equal(v, frozen[k]) for k, v in teacher.state_dict().items())
    assert any(not torch.equal(v, start[k]) for k, v in student.state_dict().items())


# --- dynamic int8 quantisation --------------------------------------------------------------------

def test_dynamic_quantisation_shrinks_linear_weights_and_keeps_the_predictions():
    torch.manual_seed(0)
    config = BertConfig(vocab_size=50, hidden_size=128, num_hidden_layers=2, num_attention_heads=2, intermediate_size=512)
    model = BertForSequenceClassification(config).eval()
    x = batch(vocab=50)
    x.pop("labels")
    quantized = quantize_dynamic(model)
    assert isinstance(model.classifier, nn.Linear) and type(quantized.classifier) is not nn.Linear  # a copy
    assert size_mb(quantized) < 0.5 * size_mb(model)
    assert torch.allclose(quantized(**x).logits, model(**x).logits, atol=0.05)
    assert latency_ms(quantized, x, repeats=2, warmup=1) > 0


def test_models_compared_for_speed_are_timed_interleaved_in_eval_mode():
    """Timed one after another, a machine that slows down in between makes identical models differ; timed in
    rounds, each round passing every model once, a slowdown shifts them all alike."""
    calls = []

    class Recorder(nn.Module):
        def __init__(self, name):
            super().__init__()
            self.name, self.dropout = name, nn.Dropout(0.5)

        def forward(self, x):
            calls.append((self.name, self.training))
            return self.dropout(x)

    models = {"a": Recorder("a"), "b": Recorder("b").train()}
    times = latencies_ms(models, {"x": torch.ones(3)}, rounds=3, warmup=1)
    assert set(times) == {"a", "b"} and all(t > 0 for t in times.values())
    assert [name for name, _ in calls] == ["a", "b"] * 4, "interleaved, warm-up round included"
    assert not any(training for _, training in calls), "timed without dropout"
    assert models["b"].training, "each model's own mode is given back"


# --- the same-budget comparison and the small Table 6 ---------------------------------------------

def test_comparison_grid_trains_each_variant_as_its_paper_does(tmp_path):
    from minibert.cli import main
    from minibert.experiments.beyond_bert import ModelComparison, Run, comparison_grid, parse_size, table6
    from minibert.experiments.grid import GridSetup

    grid = comparison_grid(sizes=[(1, 32, 2), (2, 32, 2)], seeds=(0,))
    assert [r.key for r in grid] == ["BERT-L1-H32-A2-seed0", "BERT-L2-H32-A2-seed0", "RoBERTa-L1-H32-A2-seed0",
                                     "RoBERTa-L2-H32-A2-seed0", "BERT-L2-H128-A2-seed0",
                                     "RoBERTa-L2-H128-A2-seed0", "ALBERT-L2-H128-A2-seed0"]
    assert len(comparison_grid(sizes=[(1, 32, 2)], seeds=(0, 1), size_variants=("BERT",))) == 2 * 4
    with pytest.raises(ValueError, match="unknown variant"):
        comparison_grid(size_variants=("XLNet",))
    setup = GridSetup(vocab_size=600, corpus=("inaugural/1789-Washington.txt", "inaugural/1793-Washington.txt",
                                              "inaugural/1797-Adams.txt"), eval_corpus=("gutenberg/carroll-alice.txt",),
                      eval_examples=16, max_seq_len=32, steps=2, batch_size=8, device="cpu")
    path = tmp_path / "beyond.json"
    comparison = ModelComparison(setup, path, command="minibert experiment beyond-bert --out beyond.json")
    runs = comparison.run([Run("BERT", (1, 32, 2), 0), Run("RoBERTa", (1, 32, 2), 0), Run("ALBERT", (1, 32, 2), 0)],
                          progress=False)
    bert, roberta, albert = runs
    assert all(math.isfinite(r["mlm_loss"]) and 0 <= r["mlm_accuracy"] <= 1 for r in runs)
    assert albert["parameters"] < roberta["parameters"] < bert["parameters"]  # shared layer, E = H/2; no pooler
    assert comparison.model_sizes(Run("ALBERT", (2, 32, 2), 0))["embedding_size"] == 16
    # BERT's masks are drawn in advance, in enough copies that each is seen about as often as in BERT (4 times)
    assert bert["mask_copies"] == math.ceil(setup.steps * setup.batch_size / bert["train_examples"] / 4)
    assert "mask_copies" not in roberta and "mask_copies" not in albert
    stored = json.loads(path.read_text())
    assert [r["key"] for r in stored["runs"]] == [r["key"] for r in runs] and stored["references"]["unigram_loss"] > 0
    assert "| 1 | 32 | 2 |" in table6(runs) and "5.84" in table6(runs)  # ours beside the paper's
    assert parse_size("4x256x4") == (4, 256, 4)
    with pytest.raises(ValueError, match="LxHxA"):
        parse_size("4x256")
    assert main(["experiment", "nothing"]) == 2
