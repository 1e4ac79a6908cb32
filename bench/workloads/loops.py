"""The workload suite's loops: real PyTorch training and inference loops built from
the models the GPU machine has (torchvision, timm, transformers from configs with
random weights; nothing is downloaded).

Each loop is a function make(device, seed) -> step, where step() runs one iteration
and returns a scalar tensor (the loss, or a checksum for inference). Everything a
step draws at random (batch sizes, sequence lengths, inputs) comes from generators
seeded with `seed`, so two processes run the same sequence of requests.
"""
import math
import random

import torch

LOOPS = {}


def loop(name, description):
    def register(make):
        LOOPS[name] = (make, description)
        return make
    return register


def _seeded(device, seed):
    """A step's two sources of chance: Python's (shapes) and the device's (inputs)."""
    return random.Random(seed), torch.Generator(device=device).manual_seed(seed)


def _adamw(model):
    return torch.optim.AdamW(model.parameters(), lr=1e-4)


def _train_step(model, optimizer, forward, bf16=False):
    """One step: zero_grad(set_to_none), forward under autocast if bf16, backward, step."""
    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            loss = forward()
        loss.backward()
        optimizer.step()
        return loss.detach()
    return step


def _classifier_step(model, optimizer, device, seed, batch=lambda: 64, bf16=False,
                     channels_last=False, pixels=lambda: 224):
    """A training step of an ImageNet-sized classifier on random images, pixels() px."""
    g = torch.Generator(device=device).manual_seed(seed)
    loss_fn = torch.nn.CrossEntropyLoss()

    def forward():
        n = batch()
        size = pixels()
        x = torch.randn(n, 3, size, size, device=device, generator=g)
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        y = torch.randint(0, 1000, (n,), device=device, generator=g)
        return loss_fn(model(x), y)
    return _train_step(model, optimizer, forward, bf16=bf16)


def _eval_varbatch_step(model, device, seed, max_batch, dtype):
    """Inference on random 224 px images, the batch drawn from 1..max_batch each step."""
    rng, g = _seeded(device, seed)

    @torch.no_grad()
    def step():
        x = torch.randn(rng.randint(1, max_batch), 3, 224, 224, device=device, generator=g,
                        dtype=dtype)
        return model(x).float().mean()
    return step


def _generate_step(model, device, seed, first_token, vocab, shape, **generate):
    """One greedy generate() a step, after a random prompt of shape() tokens (ids from
    first_token up); generate holds its length and search options."""
    g = torch.Generator(device=device).manual_seed(seed)

    @torch.no_grad()
    def step():
        prompt = torch.randint(first_token, vocab, shape(), device=device, generator=g)
        out = model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False,
                             **generate)
        return out.sum().float()
    return step


@loop("resnet50_sgd", "torchvision ResNet-50, batch 64 at 224 px, SGD with momentum, fp32")
def resnet50_sgd(device, seed):
    import torchvision
    model = torchvision.models.resnet50(weights=None).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    return _classifier_step(model, optimizer, device, seed)


@loop("vit_b16_adamw_bf16", "timm ViT-B/16, batch 64 at 224 px, bf16 autocast, AdamW")
def vit_b16(device, seed):
    import timm
    model = timm.create_model("vit_base_patch16_224", pretrained=False).to(device)
    optimizer = _adamw(model)
    return _classifier_step(model, optimizer, device, seed, bf16=True)


class _UNet(torch.nn.Module):
    """A U-Net-style conv net: four levels down, four up, skip connections."""

    def __init__(self, base=64, levels=4):
        super().__init__()
        nn = torch.nn

        def block(cin, cout):
            return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.GroupNorm(8, cout),
                                 nn.SiLU(), nn.Conv2d(cout, cout, 3, padding=1),
                                 nn.GroupNorm(8, cout), nn.SiLU())
        widths = [base * 2 ** i for i in range(levels + 1)]
        self.stem = block(3, widths[0])
        self.down = nn.ModuleList(block(widths[i], widths[i + 1]) for i in range(levels))
        self.up = nn.ModuleList(nn.ConvTranspose2d(widths[i + 1], widths[i], 2, stride=2)
                                for i in reversed(range(levels)))
        self.merge = nn.ModuleList(block(2 * widths[i], widths[i])
                                   for i in reversed(range(levels)))
        self.head = nn.Conv2d(widths[0], 3, 1)

    def forward(self, x):
        skips = [self.stem(x)]
        for down in self.down:
            skips.append(down(torch.nn.functional.max_pool2d(skips[-1], 2)))
        h = skips.pop()
        for up, merge in zip(self.up, self.merge):
            h = merge(torch.cat([up(h), skips.pop()], dim=1))
        return self.head(h)


@loop("unet_bf16", "U-Net-style conv net (4 levels, 64-1024 channels), batch 8 at 256 px, "
      "bf16 autocast, AdamW")
def unet_bf16(device, seed):
    model = _UNet().to(device)
    optimizer = _adamw(model)
    g = torch.Generator(device=device).manual_seed(seed)

    def forward():
        x = torch.randn(8, 3, 256, 256, device=device, generator=g)
        return torch.nn.functional.mse_loss(model(x).float(), x)
    return _train_step(model, optimizer, forward, bf16=True)


def _causal_lm_step(model, optimizer, vocab, batch, lengths, device, seed, bf16=True):
    g = torch.Generator(device=device).manual_seed(seed)

    def forward():
        tokens = torch.randint(0, vocab, (batch, lengths()), device=device, generator=g)
        return model(input_ids=tokens, labels=tokens).loss
    return _train_step(model, optimizer, forward, bf16=bf16)


def _llama_config(layers):
    """The suite's Llama-style decoder: 1024 wide, grouped-query attention, 32k vocabulary."""
    from transformers import LlamaConfig
    return LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=layers,
                       num_attention_heads=16, num_key_value_heads=4, vocab_size=32000,
                       max_position_embeddings=2048)


@loop("llama_ckpt_bf16", "Llama-style decoder (12 layers, 1024 wide, GQA), gradient "
      "checkpointing, batch 4 x 1024 tokens, bf16 autocast, AdamW")
def llama_ckpt(device, seed):
    from transformers import LlamaForCausalLM
    config = _llama_config(12)
    model = LlamaForCausalLM(config).to(device)
    model.gradient_checkpointing_enable()
    model.config.use_cache = False
    model.train()
    return _causal_lm_step(model, _adamw(model), config.vocab_size, 4, lambda: 1024, device,
                           seed)


@loop("mixtral_moe_varlen", "Mixtral-style MoE decoder (6 layers, 8 experts, top 2), batch 8, "
      "sequence length drawn from 128..1024 each step, bf16 autocast, AdamW")
def mixtral_moe(device, seed):
    from transformers import MixtralConfig, MixtralForCausalLM
    config = MixtralConfig(hidden_size=512, intermediate_size=1024, num_hidden_layers=6,
                           num_attention_heads=8, num_key_value_heads=4, num_local_experts=8,
                           num_experts_per_tok=2, vocab_size=32000, max_position_embeddings=2048)
    model = MixtralForCausalLM(config).to(device)
    model.config.use_cache = False
    model.train()
    rng = random.Random(seed)
    return _causal_lm_step(model, _adamw(model), config.vocab_size, 8,
                           lambda: rng.randint(128, 1024), device, seed)


@loop("gpt2_train_adamw", "GPT-2 small (124M), batch 8 x 512 tokens, AdamW, fp32")
def gpt2_train(device, seed):
    from transformers import GPT2Config, GPT2LMHeadModel
    config = GPT2Config()
    model = GPT2LMHeadModel(config).to(device)
    model.train()
    return _causal_lm_step(model, _adamw(model), config.vocab_size, 8, lambda: 512, device,
                           seed, bf16=False)


@loop("gpt2_generate", "GPT-2 small in bf16, generate 96 tokens greedily after a 128-token "
      "prompt, batch 8 (a KV cache growing every token)")
def gpt2_generate(device, seed):
    from transformers import GPT2Config, GPT2LMHeadModel
    config = GPT2Config()
    model = GPT2LMHeadModel(config).to(device=device, dtype=torch.bfloat16).eval()
    return _generate_step(model, device, seed, 0, config.vocab_size, lambda: (8, 128),
                          max_new_tokens=96, min_new_tokens=96, pad_token_id=config.eos_token_id)


@loop("bert_infer_varlen", "BERT-base inference, batch drawn from 1..64 and length from "
      "16..512 each step, fp32, no_grad")
def bert_infer(device, seed):
    from transformers import BertConfig, BertModel
    config = BertConfig()
    model = BertModel(config).to(device).eval()
    rng, g = _seeded(device, seed)

    @torch.no_grad()
    def step():
        batch, length = rng.randint(1, 64), rng.randint(16, 512)
        tokens = torch.randint(0, config.vocab_size, (batch, length), device=device, generator=g)
        return model(input_ids=tokens).last_hidden_state.float().mean()
    return step


@loop("efficientnet_varbatch", "timm EfficientNet-B0, batch drawn from 32, 64, 96, 128 each "
      "step at 224 px, channels_last, bf16 autocast, SGD")
def efficientnet_varbatch(device, seed):
    import timm
    model = timm.create_model("efficientnet_b0", pretrained=False).to(device)
    model = model.to(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    rng = random.Random(seed)
    # A few batch sizes: cuDNN plans each new shape (seconds for this network), which a
    # new size every step would time instead of the allocator.
    return _classifier_step(model, optimizer, device, seed,
                            batch=lambda: rng.choice((32, 64, 96, 128)), bf16=True,
                            channels_last=True)


@loop("resnet18_eval_varbatch", "torchvision ResNet-18 inference in fp16, batch drawn from "
      "1..256 each step at 224 px")
def resnet18_eval(device, seed):
    import torchvision
    model = torchvision.models.resnet18(weights=None).to(device=device, dtype=torch.float16)
    model.eval()
    return _eval_varbatch_step(model, device, seed, 256, torch.float16)


@loop("t5_train_adamw", "T5 encoder-decoder (6+6 layers, 512 wide), batch 16, 256 source and "
      "64 target tokens, AdamW, fp32")
def t5_train(device, seed):
    from transformers import T5Config, T5ForConditionalGeneration
    config = T5Config(d_model=512, d_ff=2048, d_kv=64, num_layers=6, num_heads=8,
                      vocab_size=32128, decoder_start_token_id=0, pad_token_id=0)
    model = T5ForConditionalGeneration(config).to(device)
    model.train()
    optimizer = _adamw(model)
    g = torch.Generator(device=device).manual_seed(seed)

    def forward():
        source = torch.randint(1, config.vocab_size, (16, 256), device=device, generator=g)
        target = torch.randint(1, config.vocab_size, (16, 64), device=device, generator=g)
        return model(input_ids=source, labels=target).loss
    return _train_step(model, optimizer, forward)


class _LSTMModel(torch.nn.Module):
    def __init__(self, vocab=32000, width=1024, layers=2):
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, width)
        self.lstm = torch.nn.LSTM(width, width, layers, batch_first=True)
        self.head = torch.nn.Linear(width, vocab)

    def forward(self, tokens):
        return self.head(self.lstm(self.embed(tokens))[0])


@loop("lstm_lm_varlen", "2-layer LSTM language model (1024 wide, 32k vocabulary), batch 32, "
      "sequence length drawn from 64..256 each step, Adam, fp32")
def lstm_lm(device, seed):
    model = _LSTMModel().to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)
    rng, g = _seeded(device, seed)

    def forward():
        tokens = torch.randint(0, 32000, (32, rng.randint(64, 256)), device=device, generator=g)
        logits = model(tokens[:, :-1])
        return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                 tokens[:, 1:].reshape(-1))
    return _train_step(model, optimizer, forward)


@loop("convnext_tiny_adamw", "timm ConvNeXt-Tiny, batch 64 at 224 px, fp32, AdamW")
def convnext_tiny(device, seed):
    import timm
    model = timm.create_model("convnext_tiny", pretrained=False).to(device)
    optimizer = _adamw(model)
    return _classifier_step(model, optimizer, device, seed)


@loop("convnext_train_eval_phases", "timm ConvNeXt-Tiny trained as convnext_tiny_adamw for "
      "eight steps, then three eval steps of the same model (no_grad, batch drawn from "
      "1..128 at 224 px), in turn: a validation pass between training phases")
def convnext_train_eval_phases(device, seed):
    import timm
    model = timm.create_model("convnext_tiny", pretrained=False).to(device)
    train = _classifier_step(model, _adamw(model), device, seed)
    evaluate = _eval_varbatch_step(model, device, seed + 1, 128, torch.float32)
    steps = [0]

    def step():
        phase = steps[0] % 11
        steps[0] += 1
        model.train(phase < 8)
        return train() if phase < 8 else evaluate()
    return step


@loop("llama_generate_varbatch", "Llama-style decoder (8 layers, 1024 wide) in bf16, "
      "generate 64 tokens after a prompt of 32..256 tokens, batch drawn from 1..16")
def llama_generate(device, seed):
    from transformers import LlamaForCausalLM
    config = _llama_config(8)
    model = LlamaForCausalLM(config).to(device=device, dtype=torch.bfloat16).eval()
    rng = random.Random(seed)
    return _generate_step(model, device, seed, 0, config.vocab_size,
                          lambda: (rng.randint(1, 16), rng.randint(32, 256)),
                          max_new_tokens=64, min_new_tokens=64, pad_token_id=0)


def _detection_step(model, optimizer, device, seed, instances, masks=False):
    """A training step of a torchvision detector on 2 random images of 400..800 px, each
    with a number of random boxes of at least 16 px drawn from `instances` (lowest,
    highest), labelled at random and, with `masks`, each with its box's mask."""
    rng, g = _seeded(device, seed)

    def image_and_target():
        h, w = rng.randint(400, 800), rng.randint(400, 800)
        boxes = []
        for _ in range(rng.randint(*instances)):
            x1, y1 = rng.uniform(0, w - 32), rng.uniform(0, h - 32)
            boxes.append([x1, y1, rng.uniform(x1 + 16, w), rng.uniform(y1 + 16, h)])
        target = {"boxes": torch.tensor(boxes, device=device),
                  "labels": torch.tensor([rng.randint(1, 90) for _ in boxes], device=device)}
        if masks:
            target["masks"] = torch.zeros(len(boxes), h, w, dtype=torch.uint8, device=device)
            for k, (x1, y1, x2, y2) in enumerate(boxes):
                target["masks"][k, int(y1):int(y2), int(x1):int(x2)] = 1
        return torch.rand(3, h, w, device=device, generator=g), target

    def forward():
        images, targets = zip(*(image_and_target() for _ in range(2)))
        return sum(model(list(images), list(targets)).values())
    return _train_step(model, optimizer, forward)


@loop("fasterrcnn_train_varsize", "torchvision Faster R-CNN (ResNet-50 FPN), 2 images a step, "
      "each 400..800 px high and wide, 2..12 random boxes each, SGD, fp32")
def fasterrcnn_train(device, seed):
    import torchvision
    model = torchvision.models.detection.fasterrcnn_resnet50_fpn(
        weights=None, weights_backbone=None, num_classes=91).to(device)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.005, momentum=0.9)
    return _detection_step(model, optimizer, device, seed, (2, 12))


@loop("swin_tiny_adamw_bf16", "timm Swin-T (window attention), batch 64 at 224 px, bf16 "
      "autocast, AdamW")
def swin_tiny(device, seed):
    import timm
    model = timm.create_model("swin_tiny_patch4_window7_224", pretrained=False).to(device)
    return _classifier_step(model, _adamw(model), device, seed, bf16=True)


@loop("bert_mlm_train_varlen", "BERT-base masked-LM training, batch 16, length drawn from "
      "64..512 each step, bf16 autocast, AdamW")
def bert_mlm_train(device, seed):
    from transformers import BertConfig, BertForMaskedLM
    config = BertConfig()
    model = BertForMaskedLM(config).to(device)
    model.train()
    optimizer = _adamw(model)
    rng, g = _seeded(device, seed)

    def forward():
        tokens = torch.randint(0, config.vocab_size, (16, rng.randint(64, 512)), device=device,
                               generator=g)
        labels = torch.where(torch.rand(tokens.shape, device=device, generator=g) < 0.15,
                             tokens, torch.full_like(tokens, -100))
        return model(input_ids=tokens, labels=labels).loss
    return _train_step(model, optimizer, forward, bf16=True)


@loop("gpt2_beam_search", "GPT-2 small in bf16, beam search (4 beams) for 48 tokens after a "
      "64-token prompt, batch 4 (the KV cache reordered every token)")
def gpt2_beam_search(device, seed):
    from transformers import GPT2Config, GPT2LMHeadModel
    config = GPT2Config()
    model = GPT2LMHeadModel(config).to(device=device, dtype=torch.bfloat16).eval()
    return _generate_step(model, device, seed, 0, config.vocab_size, lambda: (4, 64),
                          max_new_tokens=48, min_new_tokens=48, num_beams=4,
                          pad_token_id=config.eos_token_id)


@loop("vit_eval_varbatch", "timm ViT-B/16 inference in bf16, batch drawn from 1..128 each step "
      "at 224 px")
def vit_eval(device, seed):
    import timm
    model = timm.create_model("vit_base_patch16_224", pretrained=False)
    model = model.to(device=device, dtype=torch.bfloat16).eval()
    return _eval_varbatch_step(model, device, seed, 128, torch.bfloat16)


@loop("mobilenetv3_multiscale", "torchvision MobileNetV3-Large, batch 96, resolution drawn "
      "from 160, 192, 224, 256, 288 px each step, channels_last, bf16 autocast, SGD")
def mobilenetv3_multiscale(device, seed):
    import torchvision
    model = torchvision.models.mobilenet_v3_large(weights=None).to(device)
    model = model.to(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    rng = random.Random(seed)
    return _classifier_step(model, optimizer, device, seed, batch=lambda: 96, bf16=True,
                            channels_last=True,
                            pixels=lambda: rng.choice((160, 192, 224, 256, 288)))


@loop("t5_generate_varlen", "T5 encoder-decoder (6+6 layers, 512 wide) in bf16, generate 32 "
      "tokens greedily from a source of 64..384 tokens, batch 8 (self- and cross-attention "
      "caches)")
def t5_generate(device, seed):
    from transformers import T5Config, T5ForConditionalGeneration
    config = T5Config(d_model=512, d_ff=2048, d_kv=64, num_layers=6, num_heads=8,
                      vocab_size=32128, decoder_start_token_id=0, pad_token_id=0,
                      eos_token_id=1)
    model = T5ForConditionalGeneration(config).to(device=device, dtype=torch.bfloat16).eval()
    rng = random.Random(seed)
    return _generate_step(model, device, seed, 2, config.vocab_size,
                          lambda: (8, rng.randint(64, 384)), max_new_tokens=32,
                          min_new_tokens=32)


@loop("resnet50_accum_bf16", "torchvision ResNet-50, 4 micro-batches of 32 at 224 px "
      "accumulated into one SGD step, bf16 autocast")
def resnet50_accum(device, seed):
    import torchvision
    model = torchvision.models.resnet50(weights=None).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    g = torch.Generator(device=device).manual_seed(seed)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        optimizer.zero_grad(set_to_none=True)
        total = 0.0
        for _ in range(4):
            x = torch.randn(32, 3, 224, 224, device=device, generator=g)
            y = torch.randint(0, 1000, (32,), device=device, generator=g)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = loss_fn(model(x), y) / 4
            loss.backward()
            total = total + loss.detach()
        optimizer.step()
        return total
    return step


@loop("embedding_bag_sparse", "recommendation-style model: 8 EmbeddingBag tables of 500k x 64 "
      "with sparse gradients (bags of 1..40 ids, batch 2048) under an MLP, SparseAdam + Adam")
def embedding_bag_sparse(device, seed):
    nn = torch.nn

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.tables = nn.ModuleList(nn.EmbeddingBag(500_000, 64, mode="sum", sparse=True)
                                        for _ in range(8))
            self.mlp = nn.Sequential(nn.Linear(8 * 64, 512), nn.ReLU(), nn.Linear(512, 256),
                                     nn.ReLU(), nn.Linear(256, 1))

        def forward(self, bags):
            return self.mlp(torch.cat([t(ids, offsets) for t, (ids, offsets)
                                       in zip(self.tables, bags)], dim=1)).squeeze(1)

    model = Model().to(device)
    sparse = torch.optim.SparseAdam(list(model.tables.parameters()), lr=1e-3)
    dense = torch.optim.Adam(model.mlp.parameters(), lr=1e-3)
    rng, g = _seeded(device, seed)

    def bag():
        lengths = torch.randint(1, 41, (2048,), device=device, generator=g)
        offsets = torch.cumsum(lengths, 0) - lengths
        ids = torch.randint(0, 500_000, (int(lengths.sum().item()),), device=device,
                            generator=g)
        return ids, offsets

    def step():
        sparse.zero_grad(set_to_none=True)
        dense.zero_grad(set_to_none=True)
        rng.random()
        y = torch.rand(2048, device=device, generator=g)
        loss = nn.functional.binary_cross_entropy_with_logits(model([bag() for _ in range(8)]), y)
        loss.backward()
        sparse.step()
        dense.step()
        return loss.detach()
    return step


# A third batch, added after the others and tuned on by no figure: dynamic padding,
# sampled generation of varying length, multi-resolution transformers, graphs of
# varying size, encoder-decoder training, long-context training of varying length,
# dense concatenation, diffusion-style sampling, and a side stream that prefetches.


@loop("roberta_cls_dynpad", "RoBERTa-base classification fine-tuning, batch 32, length drawn "
      "from 32..256 each step with a padding mask (dynamic padding), bf16 autocast, AdamW")
def roberta_cls(device, seed):
    from transformers import RobertaConfig, RobertaForSequenceClassification
    config = RobertaConfig(num_labels=4, max_position_embeddings=514)
    model = RobertaForSequenceClassification(config).to(device)
    model.train()
    rng, g = _seeded(device, seed)

    def forward():
        length = rng.randint(32, 256)
        tokens = torch.randint(3, config.vocab_size, (32, length), device=device, generator=g)
        kept = torch.randint(length // 2, length + 1, (32, 1), device=device, generator=g)
        mask = (torch.arange(length, device=device)[None, :] < kept).long()
        labels = torch.randint(0, 4, (32,), device=device, generator=g)
        return model(input_ids=tokens, attention_mask=mask, labels=labels).loss
    return _train_step(model, _adamw(model), forward, bf16=True)


@loop("opt_sample_varlen", "OPT-125M-style decoder in bf16, sampled generation (top-k 50) of "
      "16..128 new tokens after a prompt of 16..128 tokens, batch drawn from 1..8 each step")
def opt_sample(device, seed):
    from transformers import OPTConfig, OPTForCausalLM
    config = OPTConfig()
    model = OPTForCausalLM(config).to(device=device, dtype=torch.bfloat16).eval()
    rng, g = _seeded(device, seed)

    @torch.no_grad()
    def step():
        batch, length, new = rng.randint(1, 8), rng.randint(16, 128), rng.randint(16, 128)
        prompt = torch.randint(4, config.vocab_size, (batch, length), device=device, generator=g)
        out = model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=True,
                             top_k=50, max_new_tokens=new, min_new_tokens=new,
                             pad_token_id=config.pad_token_id)
        return out.sum().float()
    return step


@loop("vit_s_multires_bf16", "timm ViT-S/16 with dynamic image size, batch 64, resolution drawn "
      "from 128, 160, 192, 224, 256 px each step, bf16 autocast, AdamW")
def vit_s_multires(device, seed):
    import timm
    model = timm.create_model("vit_small_patch16_224", pretrained=False,
                              dynamic_img_size=True).to(device)
    rng = random.Random(seed)
    return _classifier_step(model, _adamw(model), device, seed, bf16=True,
                            pixels=lambda: rng.choice((128, 160, 192, 224, 256)))


class _GraphNet(torch.nn.Module):
    """Mean-aggregation message passing (index_add over edges), three layers."""

    def __init__(self, features=128, hidden=256, layers=3, classes=16):
        super().__init__()
        nn = torch.nn
        self.embed = nn.Linear(features, hidden)
        self.layers = nn.ModuleList(nn.Linear(2 * hidden, hidden) for _ in range(layers))
        self.head = nn.Linear(hidden, classes)

    def forward(self, x, src, dst):
        h = torch.relu(self.embed(x))
        ones = torch.ones(dst.shape[0], device=x.device)
        degree = torch.zeros(x.shape[0], device=x.device).index_add_(0, dst, ones).clamp_(min=1)
        for layer in self.layers:
            message = torch.zeros_like(h).index_add_(0, dst, h[src]) / degree[:, None]
            h = torch.relu(layer(torch.cat([h, message], dim=1)))
        return self.head(h)


@loop("gnn_varsize", "graph network (3 mean-aggregation layers, 256 wide) on a random graph "
      "of 20k..100k nodes and 8 edges a node each step, fp32, AdamW")
def gnn_varsize(device, seed):
    model = _GraphNet().to(device)
    rng, g = _seeded(device, seed)

    def forward():
        nodes = rng.randint(20_000, 100_000)
        x = torch.randn(nodes, 128, device=device, generator=g)
        src = torch.randint(0, nodes, (8 * nodes,), device=device, generator=g)
        dst = torch.randint(0, nodes, (8 * nodes,), device=device, generator=g)
        y = torch.randint(0, 16, (nodes,), device=device, generator=g)
        return torch.nn.functional.cross_entropy(model(x, src, dst), y)
    return _train_step(model, _adamw(model), forward)


@loop("bart_train_varlen", "BART-base-style encoder-decoder training, batch 8, source of "
      "64..512 and target of 16..128 tokens drawn each step, bf16 autocast, AdamW")
def bart_train(device, seed):
    from transformers import BartConfig, BartForConditionalGeneration
    config = BartConfig(d_model=768, encoder_layers=6, decoder_layers=6,
                        encoder_attention_heads=12, decoder_attention_heads=12,
                        encoder_ffn_dim=3072, decoder_ffn_dim=3072)
    model = BartForConditionalGeneration(config).to(device).train()
    rng, g = _seeded(device, seed)

    def forward():
        source = torch.randint(3, config.vocab_size, (8, rng.randint(64, 512)), device=device,
                               generator=g)
        target = torch.randint(3, config.vocab_size, (8, rng.randint(16, 128)), device=device,
                               generator=g)
        return model(input_ids=source, labels=target).loss
    return _train_step(model, _adamw(model), forward, bf16=True)


@loop("llama_train_varlen", "Llama-style decoder (8 layers, 1024 wide, GQA) without "
      "checkpointing, batch 4, length drawn from 256..2048 each step, bf16 autocast, AdamW")
def llama_train_varlen(device, seed):
    from transformers import LlamaForCausalLM
    config = _llama_config(8)
    model = LlamaForCausalLM(config).to(device)
    model.config.use_cache = False
    model.train()
    rng = random.Random(seed)
    return _causal_lm_step(model, _adamw(model), config.vocab_size, 4,
                           lambda: rng.randint(256, 2048), device, seed)


@loop("densenet121_bf16", "torchvision DenseNet-121 (a concatenation per layer), batch 64 at "
      "224 px, bf16 autocast, SGD")
def densenet121(device, seed):
    import torchvision
    model = torchvision.models.densenet121(weights=None).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    return _classifier_step(model, optimizer, device, seed, bf16=True)


@loop("unet_sampling_varbatch", "diffusion-style sampling: the U-Net-style net in bf16, 20 "
      "denoising passes a step on a batch drawn from 1..4 at 256 px, no_grad")
def unet_sampling(device, seed):
    model = _UNet().to(device=device, dtype=torch.bfloat16).eval()
    rng, g = _seeded(device, seed)

    @torch.no_grad()
    def step():
        x = torch.randn(rng.randint(1, 4), 3, 256, 256, device=device, generator=g,
                        dtype=torch.bfloat16)
        for _ in range(20):
            x = x - 0.05 * model(x)
        return x.float().mean()
    return step


@loop("resnet50_prefetch", "torchvision ResNet-50, batch 64 at 224 px, channels_last, bf16 "
      "autocast, SGD; the next batch made on a side stream during each step (record_stream)")
def resnet50_prefetch(device, seed):
    import torchvision
    model = torchvision.models.resnet50(weights=None).to(device)
    model = model.to(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    side = torch.cuda.Stream(device=device)
    g = torch.Generator(device=device).manual_seed(seed)
    loss_fn = torch.nn.CrossEntropyLoss()

    def make_batch():
        with torch.cuda.stream(side):
            x = torch.randn(64, 3, 224, 224, device=device, generator=g)
            x = x.contiguous(memory_format=torch.channels_last)
            y = torch.randint(0, 1000, (64,), device=device, generator=g)
        return x, y
    pending = [make_batch()]

    def forward():
        torch.cuda.current_stream(device).wait_stream(side)
        x, y = pending.pop()
        x.record_stream(torch.cuda.current_stream(device))
        y.record_stream(torch.cuda.current_stream(device))
        pending.append(make_batch())
        return loss_fn(model(x), y)
    return _train_step(model, optimizer, forward, bf16=True)


# A fourth batch, added after the others and tuned on by no figure: a model compiled with
# torch.compile, segmentation at a size drawn per step, a two-tower contrastive model,
# inference from several Python threads at once (a stream each), MoE inference of varying
# shape, and fp16 mixed precision with a gradient scaler.

@loop("gpt2_compile_train", "GPT-2-style decoder (4 layers, 768 wide) compiled with "
      "torch.compile (Inductor, default mode), batch 8 x 512 tokens, bf16 autocast, AdamW")
def gpt2_compile_train(device, seed):
    from transformers import GPT2Config, GPT2LMHeadModel
    config = GPT2Config(n_layer=4)
    model = GPT2LMHeadModel(config).to(device)
    model.train()
    compiled = torch.compile(model)
    g = torch.Generator(device=device).manual_seed(seed)

    def forward():
        tokens = torch.randint(0, config.vocab_size, (8, 512), device=device, generator=g)
        return compiled(input_ids=tokens, labels=tokens).loss
    return _train_step(model, _adamw(model), forward, bf16=True)


@loop("deeplabv3_multiscale_bf16", "torchvision DeepLabV3-ResNet-50 segmentation, batch 8, "
      "image size drawn from 320, 384, 448, 512 px each step, bf16 autocast, SGD")
def deeplabv3_multiscale(device, seed):
    import torchvision
    model = torchvision.models.segmentation.deeplabv3_resnet50(
        weights=None, weights_backbone=None, num_classes=21).to(device)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    rng, g = _seeded(device, seed)
    loss_fn = torch.nn.CrossEntropyLoss()

    def forward():
        size = rng.choice((320, 384, 448, 512))
        x = torch.randn(8, 3, size, size, device=device, generator=g)
        y = torch.randint(0, 21, (8, size, size), device=device, generator=g)
        return loss_fn(model(x)["out"], y)
    return _train_step(model, optimizer, forward, bf16=True)


@loop("clip_train_varlen", "CLIP-style image (ViT-B/32) and text towers (transformers), "
      "contrastive loss, batch 64 at 224 px, caption length drawn from 8..77 each step, "
      "bf16 autocast, AdamW")
def clip_train(device, seed):
    from transformers import CLIPConfig, CLIPModel
    config = CLIPConfig()
    model = CLIPModel(config).to(device)
    model.train()
    rng, g = _seeded(device, seed)

    def forward():
        ids = torch.randint(0, config.text_config.vocab_size, (64, rng.randint(8, 77)),
                            device=device, generator=g)
        pixels = torch.randn(64, 3, 224, 224, device=device, generator=g)
        return model(input_ids=ids, pixel_values=pixels, return_loss=True).loss
    return _train_step(model, _adamw(model), forward, bf16=True)


@loop("resnet18_threads_infer", "torchvision ResNet-18 inference in fp16 from 4 Python threads "
      "at once, each on its own CUDA stream with a batch drawn from 1..32, no_grad")
def resnet18_threads_infer(device, seed):
    from concurrent.futures import ThreadPoolExecutor
    import torchvision
    model = torchvision.models.resnet18(weights=None).to(device=device,
                                                         dtype=torch.float16).eval()
    lanes = 4
    streams = [torch.cuda.Stream(device=device) for _ in range(lanes)]
    rngs = [random.Random(seed + k) for k in range(lanes)]
    generators = [torch.Generator(device=device).manual_seed(seed + k) for k in range(lanes)]
    pool = ThreadPoolExecutor(lanes)

    def lane(k):
        with torch.no_grad(), torch.cuda.stream(streams[k]):
            x = torch.randn(rngs[k].randint(1, 32), 3, 224, 224, device=device,
                            dtype=torch.float16, generator=generators[k])
            return model(x).float().sum()

    def step():
        sums = list(pool.map(lane, range(lanes)))
        main = torch.cuda.current_stream(device)
        for s, total in zip(streams, sums):
            main.wait_stream(s)
            total.record_stream(main)
        return torch.stack(sums).sum()
    return step


@loop("mixtral_infer_varlen", "Mixtral-style MoE decoder (6 layers, 8 experts, top 2) in bf16, "
      "one forward pass without grad, batch drawn from 1..16 and length from 64..1024 each step")
def mixtral_infer(device, seed):
    from transformers import MixtralConfig, MixtralForCausalLM
    config = MixtralConfig(hidden_size=512, intermediate_size=1024, num_hidden_layers=6,
                           num_attention_heads=8, num_key_value_heads=4, num_local_experts=8,
                           num_experts_per_tok=2, vocab_size=32000, max_position_embeddings=2048)
    model = MixtralForCausalLM(config).to(device=device, dtype=torch.bfloat16).eval()
    model.config.use_cache = False
    rng, g = _seeded(device, seed)

    @torch.no_grad()
    def step():
        tokens = torch.randint(0, config.vocab_size, (rng.randint(1, 16), rng.randint(64, 1024)),
                               device=device, generator=g)
        return model(input_ids=tokens).logits.float().mean()
    return step


@loop("resnet50_amp_fp16", "torchvision ResNet-50, batch 128 at 224 px, channels_last, fp16 "
      "autocast with a gradient scaler (torch.amp.GradScaler), SGD")
def resnet50_amp_fp16(device, seed):
    import torchvision
    model = torchvision.models.resnet50(weights=None).to(device)
    model = model.to(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.amp.GradScaler("cuda")
    g = torch.Generator(device=device).manual_seed(seed)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        optimizer.zero_grad(set_to_none=True)
        x = torch.randn(128, 3, 224, 224, device=device, generator=g)
        x = x.contiguous(memory_format=torch.channels_last)
        y = torch.randint(0, 1000, (128,), device=device, generator=g)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        return loss.detach()
    return step


# A fifth batch, tuned on by no figure: two models trained in turn (a GAN), adapters
# trained on a frozen model (LoRA), a backbone unfrozen partway through the timed steps,
# eval outputs gathered over several steps, a VAE-style decoder at a resolution drawn per
# step, speech-style CTC training of varying length, generation with a static KV cache,
# and two-stage inference (detection, then classification of a varying number of crops).

@loop("dcgan_train", "DCGAN-style generator and discriminator (64 px, 64-512 channels), "
      "batch 256, a discriminator step then a generator step each iteration, two Adam "
      "optimizers, fp32")
def dcgan_train(device, seed):
    nn = torch.nn

    def up(cin, cout, stride, padding):
        return [nn.ConvTranspose2d(cin, cout, 4, stride, padding, bias=False),
                nn.BatchNorm2d(cout), nn.ReLU(True)]

    def down(cin, cout, norm=True):
        return [nn.Conv2d(cin, cout, 4, 2, 1, bias=False)] + \
            ([nn.BatchNorm2d(cout)] if norm else []) + [nn.LeakyReLU(0.2, True)]
    generator = nn.Sequential(*up(100, 512, 1, 0), *up(512, 256, 2, 1), *up(256, 128, 2, 1),
                              *up(128, 64, 2, 1), nn.ConvTranspose2d(64, 3, 4, 2, 1, bias=False),
                              nn.Tanh()).to(device)
    discriminator = nn.Sequential(*down(3, 64, norm=False), *down(64, 128), *down(128, 256),
                                  *down(256, 512), nn.Conv2d(512, 1, 4, 1, 0, bias=False),
                                  nn.Flatten()).to(device)
    opt_g = torch.optim.Adam(generator.parameters(), lr=2e-4, betas=(0.5, 0.999))
    opt_d = torch.optim.Adam(discriminator.parameters(), lr=2e-4, betas=(0.5, 0.999))
    bce = nn.BCEWithLogitsLoss()
    g = torch.Generator(device=device).manual_seed(seed)
    n = 256

    def step():
        real = torch.rand(n, 3, 64, 64, device=device, generator=g) * 2 - 1
        fake = generator(torch.randn(n, 100, 1, 1, device=device, generator=g))
        ones = torch.ones(n, 1, device=device)
        opt_d.zero_grad(set_to_none=True)
        loss_d = bce(discriminator(real), ones) + \
            bce(discriminator(fake.detach()), torch.zeros(n, 1, device=device))
        loss_d.backward()
        opt_d.step()
        opt_g.zero_grad(set_to_none=True)
        loss_g = bce(discriminator(fake), ones)
        loss_g.backward()
        opt_g.step()
        return (loss_d + loss_g).detach()
    return step


class _LoRALinear(torch.nn.Module):
    """A frozen linear layer plus a trainable low-rank update (rank 16, fp32 weights)."""

    def __init__(self, base, rank=16):
        super().__init__()
        self.base = base
        device = base.weight.device
        self.a = torch.nn.Parameter(torch.randn(rank, base.in_features, device=device) * 0.01)
        self.b = torch.nn.Parameter(torch.zeros(base.out_features, rank, device=device))

    def forward(self, x):
        low = torch.nn.functional.linear(torch.nn.functional.linear(x, self.a), self.b)
        return self.base(x) + low


@loop("lora_llama_varlen", "Llama-style decoder (12 layers, 1024 wide, GQA) frozen in bf16 with "
      "rank-16 LoRA adapters on every attention projection, batch 4, length drawn from "
      "128..1024 each step, bf16 autocast, AdamW on the adapters only")
def lora_llama(device, seed):
    from transformers import LlamaForCausalLM
    config = _llama_config(12)
    model = LlamaForCausalLM(config).to(device=device, dtype=torch.bfloat16)
    model.requires_grad_(False)
    for layer in model.model.layers:
        attention = layer.self_attn
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            setattr(attention, name, _LoRALinear(getattr(attention, name)))
    model.train()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    rng = random.Random(seed)
    return _causal_lm_step(model, optimizer, config.vocab_size, 4,
                           lambda: rng.randint(128, 1024), device, seed)


@loop("resnet50_unfreeze", "torchvision ResNet-50 fine-tuned, batch 64 at 224 px, bf16 "
      "autocast, SGD with momentum: only the classifier trains for the first 15 steps, then "
      "the whole network (gradients and momentum for the backbone appear in the timed steps)")
def resnet50_unfreeze(device, seed):
    import torchvision
    model = torchvision.models.resnet50(weights=None).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    model.requires_grad_(False)
    model.fc.requires_grad_(True)
    train = _classifier_step(model, optimizer, device, seed, bf16=True)
    steps = [0]

    def step():
        steps[0] += 1
        if steps[0] == 16:
            model.requires_grad_(True)
        return train()
    return step


@loop("vit_eval_gather", "timm ViT-B/16 inference in bf16, batch drawn from 16..128 each step "
      "at 224 px; each step's token features kept on the GPU and every 8th step concatenated "
      "into a similarity matrix, then dropped (an eval pass that gathers its outputs)")
def vit_eval_gather(device, seed):
    import timm
    model = timm.create_model("vit_base_patch16_224", pretrained=False)
    model = model.to(device=device, dtype=torch.bfloat16).eval()
    rng, g = _seeded(device, seed)
    kept = []

    @torch.no_grad()
    def step():
        x = torch.randn(rng.randint(16, 128), 3, 224, 224, device=device, generator=g,
                        dtype=torch.bfloat16)
        kept.append(model.forward_features(x))
        if len(kept) < 8:
            return kept[-1].float().mean()
        pooled = torch.cat(kept).float().mean(dim=1)
        kept.clear()
        pooled = torch.nn.functional.normalize(pooled, dim=1)
        return (pooled @ pooled.t()).mean()
    return step


class _VAEDecoder(torch.nn.Module):
    """A VAE-style image decoder: 4 latent channels up to RGB at 8 x the latent's size,
    512-128 channels, GroupNorm, one self-attention block at the latent's size."""

    class Res(torch.nn.Module):
        def __init__(self, cin, cout):
            super().__init__()
            nn = torch.nn
            self.norm1, self.conv1 = nn.GroupNorm(32, cin), nn.Conv2d(cin, cout, 3, padding=1)
            self.norm2, self.conv2 = nn.GroupNorm(32, cout), nn.Conv2d(cout, cout, 3, padding=1)
            self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

        def forward(self, x):
            silu = torch.nn.functional.silu
            h = self.conv1(silu(self.norm1(x)))
            return self.skip(x) + self.conv2(silu(self.norm2(h)))

    class Attention(torch.nn.Module):
        def __init__(self, c):
            super().__init__()
            self.norm = torch.nn.GroupNorm(32, c)
            self.qkv, self.out = torch.nn.Conv2d(c, 3 * c, 1), torch.nn.Conv2d(c, c, 1)

        def forward(self, x):
            n, c, h, w = x.shape
            q, k, v = self.qkv(self.norm(x)).reshape(n, 3, c, h * w).transpose(2, 3).unbind(1)
            a = torch.nn.functional.scaled_dot_product_attention(q[:, None], k[:, None],
                                                                 v[:, None])[:, 0]
            return x + self.out(a.transpose(1, 2).reshape(n, c, h, w))

    def __init__(self):
        super().__init__()
        nn, Res = torch.nn, _VAEDecoder.Res
        self.conv_in = nn.Conv2d(4, 512, 3, padding=1)
        self.mid = nn.Sequential(Res(512, 512), _VAEDecoder.Attention(512), Res(512, 512))
        widths = [(512, 512), (512, 512), (512, 256), (256, 128)]
        self.levels = nn.ModuleList(nn.Sequential(Res(cin, cout), Res(cout, cout))
                                    for cin, cout in widths)
        self.ups = nn.ModuleList(nn.Conv2d(cout, cout, 3, padding=1) for _, cout in widths[:3])
        self.norm_out, self.conv_out = nn.GroupNorm(32, 128), nn.Conv2d(128, 3, 3, padding=1)

    def forward(self, z):
        h = self.mid(self.conv_in(z))
        for i, level in enumerate(self.levels):
            h = level(h)
            if i < len(self.ups):
                h = self.ups[i](torch.nn.functional.interpolate(h, scale_factor=2.0,
                                                                mode="nearest"))
        return self.conv_out(torch.nn.functional.silu(self.norm_out(h)))


@loop("vae_decode_varres", "VAE-style image decoder (512-128 channels, GroupNorm, attention "
      "at the latent's size) in bf16, no_grad, batch drawn from 1..4 and output size from "
      "256, 384, 512, 640 px each step (activations of 100-800 MB)")
def vae_decode_varres(device, seed):
    model = _VAEDecoder().to(device=device, dtype=torch.bfloat16).eval()
    rng, g = _seeded(device, seed)

    @torch.no_grad()
    def step():
        side = rng.choice((256, 384, 512, 640)) // 8
        z = torch.randn(rng.randint(1, 4), 4, side, side, device=device, generator=g,
                        dtype=torch.bfloat16)
        return model(z).float().mean()
    return step


@loop("speech_ctc_varlen", "speech-style encoder: two strided Conv1d layers over 80 mel "
      "features, then 12 pre-norm Transformer encoder layers (512 wide, nn.TransformerEncoder), "
      "CTC loss over 1000 tokens; batch 16, 200..1500 frames and a target length drawn each "
      "step, bf16 autocast, AdamW")
def speech_ctc(device, seed):
    nn = torch.nn

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.subsample = nn.Sequential(nn.Conv1d(80, 512, 3, stride=2, padding=1),
                                           nn.GELU(), nn.Conv1d(512, 512, 3, stride=2,
                                                                padding=1), nn.GELU())
            layer = nn.TransformerEncoderLayer(512, 8, 2048, dropout=0.1, batch_first=True,
                                               norm_first=True)
            self.encoder = nn.TransformerEncoder(layer, 12, enable_nested_tensor=False)
            self.head = nn.Linear(512, 1000)

        def forward(self, x):
            return self.head(self.encoder(self.subsample(x).transpose(1, 2)))
    model = Model().to(device)
    rng, g = _seeded(device, seed)
    n = 16

    def forward():
        x = torch.randn(n, 80, rng.randint(200, 1500), device=device, generator=g)
        log_probs = model(x).float().log_softmax(-1).transpose(0, 1)
        frames = log_probs.shape[0]
        length = rng.randint(10, frames // 4)
        targets = torch.randint(1, 1000, (n, length), device=device, generator=g)
        return torch.nn.functional.ctc_loss(log_probs, targets,
                                            torch.full((n,), frames, dtype=torch.long),
                                            torch.full((n,), length, dtype=torch.long))
    return _train_step(model, _adamw(model), forward, bf16=True)


@loop("llama_generate_static", "Llama-style decoder (8 layers, 1024 wide) in bf16, generate "
      "64 tokens after a prompt of 32..256 tokens, batch drawn from 1..16, with a static KV "
      "cache (cache_implementation='static': the whole cache made at the start of each "
      "generate)")
def llama_generate_static(device, seed):
    from transformers import LlamaForCausalLM
    config = _llama_config(8)
    model = LlamaForCausalLM(config).to(device=device, dtype=torch.bfloat16).eval()
    rng = random.Random(seed)
    # Without torch.compile: recompiling for each drawn shape would time the compiler.
    extra = {"disable_compile": True} if hasattr(model.generation_config,
                                                   "disable_compile") else {}
    return _generate_step(model, device, seed, 0, config.vocab_size,
                          lambda: (rng.randint(1, 16), rng.randint(32, 256)),
                          max_new_tokens=64, min_new_tokens=64, pad_token_id=0,
                          cache_implementation="static", **extra)


@loop("detect_then_classify", "two-stage inference in fp16: torchvision Faster R-CNN "
      "(MobileNetV3 FPN) on 4 images of 480..800 px, then 1..96 crops (roi_align to 224 px) "
      "classified by a ResNet-50, no_grad")
def detect_then_classify(device, seed):
    import torchvision
    detector = torchvision.models.detection.fasterrcnn_mobilenet_v3_large_fpn(
        weights=None, weights_backbone=None, num_classes=91).to(device).eval()
    classifier = torchvision.models.resnet50(weights=None).to(device=device,
                                                              dtype=torch.float16).eval()
    rng, g = _seeded(device, seed)

    @torch.no_grad()
    def step():
        sizes = [(rng.randint(480, 800), rng.randint(480, 800)) for _ in range(4)]
        images = [torch.rand(3, h, w, device=device, generator=g) for h, w in sizes]
        with torch.autocast("cuda", dtype=torch.float16):
            detections = detector(images)
        boxes = []
        for k, (h, w) in enumerate(sizes):
            for _ in range(rng.randint(0, 24)):
                x1, y1 = rng.uniform(0, w - 32), rng.uniform(0, h - 32)
                boxes.append([k, x1, y1, rng.uniform(x1 + 16, w), rng.uniform(y1 + 16, h)])
        boxes = boxes or [[0, 0.0, 0.0, 64.0, 64.0]]
        batch = torch.zeros(4, 3, max(h for h, _ in sizes), max(w for _, w in sizes),
                            device=device)
        for k, (h, w) in enumerate(sizes):
            batch[k, :, :h, :w] = images[k]
        crops = torchvision.ops.roi_align(batch, torch.tensor(boxes, device=device),
                                          output_size=224, aligned=True)
        scores = classifier(crops.half()).float().softmax(-1)
        total = scores.max(-1).values.sum()
        for d in detections:
            total = total + d["scores"].float().sum()
        return total
    return step


# A sixth batch, tuned on by no figure: reinforcement-learning updates of small networks
# (thousands of tiny tensors a step), video training with the clip length drawn, assisted
# generation (a draft model whose KV cache is cut back every round) and a state-space
# model trained through its sequential scan.

@loop("ppo_update_small", "PPO-style update: policy and value MLPs (64 -> 256 -> 256), a "
      "rollout of 4096 random transitions, 4 epochs of minibatches of 256..1024 drawn per "
      "step, clipped surrogate loss, Adam, fp32")
def ppo_update_small(device, seed):
    policy = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.Tanh(),
                                 torch.nn.Linear(256, 256), torch.nn.Tanh(),
                                 torch.nn.Linear(256, 18)).to(device)
    value = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.Tanh(),
                                torch.nn.Linear(256, 256), torch.nn.Tanh(),
                                torch.nn.Linear(256, 1)).to(device)
    optimizer = torch.optim.Adam(list(policy.parameters()) + list(value.parameters()), lr=3e-4)
    rng, g = _seeded(device, seed)

    def step():
        n = 4096
        obs = torch.randn(n, 64, device=device, generator=g)
        actions = torch.randint(0, 18, (n,), device=device, generator=g)
        advantages = torch.randn(n, device=device, generator=g)
        returns = torch.randn(n, device=device, generator=g)
        with torch.no_grad():
            old_logp = policy(obs).log_softmax(-1).gather(1, actions[:, None]).squeeze(1)
        minibatch = rng.choice([256, 512, 1024])
        total = torch.zeros((), device=device)
        for _ in range(4):
            order = torch.randperm(n, device=device, generator=g)
            for start in range(0, n, minibatch):
                k = order[start:start + minibatch]
                logits = policy(obs[k])
                logp = logits.log_softmax(-1).gather(1, actions[k, None]).squeeze(1)
                ratio = (logp - old_logp[k]).exp()
                adv = advantages[k]
                surrogate = torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv).mean()
                entropy = -(logits.softmax(-1) * logits.log_softmax(-1)).sum(-1).mean()
                value_loss = (value(obs[k]).squeeze(1) - returns[k]).pow(2).mean()
                loss = -surrogate + 0.5 * value_loss - 0.01 * entropy
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(list(policy.parameters()) +
                                               list(value.parameters()), 0.5)
                optimizer.step()
                total = total + loss.detach()
        return total
    return step


@loop("r3d_video_varframes", "torchvision R3D-18 video classifier, batch 8 clips at 112 px, "
      "clip length drawn from 8, 12, 16 frames each step, bf16 autocast, SGD with momentum")
def r3d_video_varframes(device, seed):
    import torchvision
    model = torchvision.models.video.r3d_18(weights=None, num_classes=400).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    rng, g = _seeded(device, seed)
    loss_fn = torch.nn.CrossEntropyLoss()

    def forward():
        x = torch.randn(8, 3, rng.choice([8, 12, 16]), 112, 112, device=device, generator=g)
        y = torch.randint(0, 400, (8,), device=device, generator=g)
        return loss_fn(model(x), y)
    return _train_step(model, optimizer, forward, bf16=True)


@loop("llama_assisted_generate", "assisted generation: a Llama-style target (8 layers, 1024 "
      "wide) and a 2-layer draft of the same vocabulary in bf16, generate 48 tokens after a "
      "prompt of 32..256, batch 1 (the draft's cache cut back each round)")
def llama_assisted_generate(device, seed):
    from transformers import LlamaConfig, LlamaForCausalLM
    target = LlamaForCausalLM(_llama_config(8)).to(device=device, dtype=torch.bfloat16).eval()
    draft_config = LlamaConfig(hidden_size=512, intermediate_size=1408, num_hidden_layers=2,
                               num_attention_heads=8, num_key_value_heads=4,
                               vocab_size=32000, max_position_embeddings=2048)
    draft = LlamaForCausalLM(draft_config).to(device=device, dtype=torch.bfloat16).eval()
    rng = random.Random(seed)
    return _generate_step(target, device, seed, 0, 32000, lambda: (1, rng.randint(32, 256)),
                          max_new_tokens=48, min_new_tokens=48, pad_token_id=0,
                          assistant_model=draft)


@loop("mamba_train_varlen", "transformers Mamba (4 layers, 512 wide, its sequential scan: "
      "no fused kernels), batch 8, length drawn from 64..256 each step, bf16 autocast, AdamW")
def mamba_train_varlen(device, seed):
    from transformers import MambaConfig, MambaForCausalLM
    config = MambaConfig(hidden_size=512, num_hidden_layers=4, vocab_size=32000,
                         state_size=16, use_mambapy=False)
    model = MambaForCausalLM(config).to(device).train()
    rng, g = _seeded(device, seed)

    def forward():
        tokens = torch.randint(0, config.vocab_size, (8, rng.randint(64, 256)), device=device,
                               generator=g)
        return model(input_ids=tokens, labels=tokens).loss
    return _train_step(model, _adamw(model), forward, bf16=True)


# A seventh batch, tuned on by no figure: a serving loop that batches requests as they
# come (each request's KV cache grown by torch.cat, requests joining and leaving every
# iteration), point clouds of a drawn size grouped by nearest neighbours, preference
# training against a frozen reference model, and a diffusion transformer trained on
# aspect-ratio buckets.

class _ServingDecoder(torch.nn.Module):
    """A Llama-like decoder for a hand-written serving loop: the new tokens of every
    request packed into one batch for the dense layers, attention request by request
    against that request's own KV cache, grown by torch.cat each token (as
    transformers' DynamicCache grows it)."""

    def __init__(self, layers=8, width=1024, heads=16, hidden=2816, vocab=32000):
        super().__init__()
        self.heads, self.head_width = heads, width // heads
        self.embed = torch.nn.Embedding(vocab, width)
        self.blocks = torch.nn.ModuleList(torch.nn.ModuleDict({
            "norm1": torch.nn.RMSNorm(width),
            "qkv": torch.nn.Linear(width, 3 * width, bias=False),
            "out": torch.nn.Linear(width, width, bias=False),
            "norm2": torch.nn.RMSNorm(width),
            "up": torch.nn.Linear(width, 2 * hidden, bias=False),
            "down": torch.nn.Linear(hidden, width, bias=False)}) for _ in range(layers))
        self.norm = torch.nn.RMSNorm(width)
        self.lm_head = torch.nn.Linear(width, vocab, bias=False)

    def forward(self, tokens, lengths, caches):
        """tokens: every request's new tokens, packed; lengths: how many each request
        has; caches[i][layer]: request i's (keys, values), None before its first."""
        x = self.embed(tokens)
        for layer, block in enumerate(self.blocks):
            q, k, v = block["qkv"](block["norm1"](x)).view(-1, 3, self.heads,
                                                           self.head_width).unbind(1)
            outs, start = [], 0
            for i, n in enumerate(lengths):
                qi, ki, vi = (t[start:start + n].transpose(0, 1).unsqueeze(0) for t in (q, k, v))
                start += n
                if caches[i][layer] is None:
                    ki, vi = ki.contiguous(), vi.contiguous()
                else:
                    keys, values = caches[i][layer]
                    ki, vi = torch.cat([keys, ki], dim=2), torch.cat([values, vi], dim=2)
                caches[i][layer] = (ki, vi)
                o = torch.nn.functional.scaled_dot_product_attention(qi, ki, vi, is_causal=n > 1)
                outs.append(o.squeeze(0).transpose(0, 1).reshape(n, -1))
            x = x + block["out"](torch.cat(outs))
            gate, up = block["up"](block["norm2"](x)).chunk(2, -1)
            x = x + block["down"](torch.nn.functional.silu(gate) * up)
        last = torch.tensor([sum(lengths[:i + 1]) - 1 for i in range(len(lengths))],
                            device=tokens.device)
        return self.lm_head(self.norm(x[last]))


@loop("continuous_batching_decode", "a serving loop in bf16: a Llama-style decoder (8 "
      "layers, 1024 wide), up to 12 requests at once, each joining with a prompt of "
      "32..512 tokens and leaving after 16..256 new ones; 24 decode iterations a step, a "
      "joining request's prompt packed with the others' next tokens; each request's KV "
      "cache grown by torch.cat")
def continuous_batching_decode(device, seed):
    layers, vocab = 8, 32000
    model = _ServingDecoder(layers=layers, vocab=vocab).to(device=device,
                                                          dtype=torch.bfloat16).eval()
    rng, g = _seeded(device, seed)
    active = []  # requests: {"caches", "left", "last"}; they live across steps

    @torch.no_grad()
    def step():
        total = torch.zeros((), device=device)
        for _ in range(24):
            joining = []
            while len(active) + len(joining) < 12:
                if (active or joining) and rng.random() >= 0.25:
                    break
                n = rng.randint(32, 512)
                joining.append({"caches": [None] * layers, "left": rng.randint(16, 256),
                                "prompt": torch.randint(0, vocab, (n,), device=device,
                                                        generator=g)})
            batch = active + joining
            tokens = torch.cat([r["last"] for r in active] + [r["prompt"] for r in joining])
            lengths = [1] * len(active) + [len(r.pop("prompt")) for r in joining]
            logits = model(tokens, lengths, [r["caches"] for r in batch])
            next_tokens = logits.argmax(-1)
            total = total + logits.float().amax(-1).sum()
            for i, r in enumerate(batch):
                r["last"] = next_tokens[i:i + 1]
                r["left"] -= 1
            active[:] = [r for r in batch if r["left"] > 0]
        return total
    return step


class _PointCloudNet(torch.nn.Module):
    """PointNet++-style classifier: two set abstractions (random centres, their 32
    nearest points by cdist and topk, a shared MLP, the max over the neighbours), then
    the max over the centres and an MLP head."""

    def __init__(self, classes=40):
        super().__init__()

        def mlp(*widths):
            layers = []
            for a, b in zip(widths, widths[1:]):
                layers += [torch.nn.Linear(a, b), torch.nn.LayerNorm(b), torch.nn.ReLU()]
            return torch.nn.Sequential(*layers)
        self.abstraction1 = mlp(3 + 3, 64, 64, 128)
        self.abstraction2 = mlp(3 + 128, 128, 128, 256)
        self.head = torch.nn.Sequential(mlp(256, 512, 256), torch.nn.Linear(256, classes))

    @staticmethod
    def group(points, features, centres, k):
        """(batch, centres, k, 3 + features): each centre's k nearest points, relative."""
        nearest = torch.cdist(centres, points).topk(k, largest=False).indices
        b = torch.arange(points.shape[0], device=points.device)[:, None, None]
        return torch.cat([points[b, nearest] - centres[:, :, None], features[b, nearest]], -1)

    def forward(self, points, generator):
        n = points.shape[1]
        m1 = n // 8
        c1 = points[:, torch.randperm(n, device=points.device, generator=generator)[:m1]]
        f1 = self.abstraction1(self.group(points, points, c1, 32)).amax(2)
        c2 = c1[:, torch.randperm(m1, device=points.device, generator=generator)[:m1 // 4]]
        f2 = self.abstraction2(self.group(c1, f1, c2, 32)).amax(2)
        return self.head(f2.amax(1))


@loop("pointcloud_knn_varpoints", "PointNet++-style classifier trained on 16 random point "
      "clouds of 1024..8192 points drawn each step (nearest neighbours by cdist and topk), "
      "bf16 autocast, AdamW")
def pointcloud_knn_varpoints(device, seed):
    model = _PointCloudNet().to(device).train()
    rng, g = _seeded(device, seed)
    loss_fn = torch.nn.CrossEntropyLoss()

    def forward():
        points = torch.randn(16, rng.randint(1024, 8192), 3, device=device, generator=g)
        labels = torch.randint(0, 40, (16,), device=device, generator=g)
        return loss_fn(model(points, g), labels)
    return _train_step(model, _adamw(model), forward, bf16=True)


@loop("llama_dpo_varlen", "DPO-style preference step: a Llama-style policy (6 layers, 1024 "
      "wide, GQA) and a frozen copy as reference, 4 chosen and 4 rejected sequences of a "
      "length drawn from 128..768 each step, log-probabilities in fp32, bf16 autocast, AdamW")
def llama_dpo_varlen(device, seed):
    import copy
    from transformers import LlamaForCausalLM
    policy = LlamaForCausalLM(_llama_config(6)).to(device).train()
    policy.config.use_cache = False
    reference = copy.deepcopy(policy).eval().requires_grad_(False)
    rng, g = _seeded(device, seed)

    def sequence_logp(model, tokens):
        logits = model(input_ids=tokens).logits[:, :-1].float()
        return logits.log_softmax(-1).gather(-1, tokens[:, 1:, None]).squeeze(-1).sum(-1)

    def forward():
        tokens = torch.randint(0, 32000, (8, rng.randint(128, 768)), device=device, generator=g)
        with torch.no_grad():
            reference_logp = sequence_logp(reference, tokens)
        logp = sequence_logp(policy, tokens)
        margin = (logp[:4] - reference_logp[:4]) - (logp[4:] - reference_logp[4:])
        return -torch.nn.functional.logsigmoid(0.1 * margin).mean()
    return _train_step(policy, _adamw(policy), forward, bf16=True)


def _sinusoid(values, width):
    """(len(values), width) sine and cosine features of a 1-d tensor of positions."""
    half = width // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, device=values.device) / half)
    angles = values[:, None].float() * freqs[None]
    return torch.cat([angles.cos(), angles.sin()], -1)


class _DiTBlock(torch.nn.Module):
    """A transformer block whose layer norms are shifted, scaled and gated by the
    conditioning (adaLN)."""

    def __init__(self, width, heads):
        super().__init__()
        self.norm1 = torch.nn.LayerNorm(width, elementwise_affine=False)
        self.attention = torch.nn.MultiheadAttention(width, heads, batch_first=True)
        self.norm2 = torch.nn.LayerNorm(width, elementwise_affine=False)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(width, 4 * width),
                                       torch.nn.GELU(approximate="tanh"),
                                       torch.nn.Linear(4 * width, width))
        self.modulation = torch.nn.Sequential(torch.nn.SiLU(), torch.nn.Linear(width, 6 * width))

    def forward(self, x, c):
        shift1, scale1, gate1, shift2, scale2, gate2 = self.modulation(c)[:, None].chunk(6, -1)
        h = self.norm1(x) * (1 + scale1) + shift1
        x = x + gate1 * self.attention(h, h, h, need_weights=False)[0]
        h = self.norm2(x) * (1 + scale2) + shift2
        return x + gate2 * self.mlp(h)


class _DiT(torch.nn.Module):
    """A diffusion transformer over 2 x 2 patches of a 4-channel latent, conditioned on
    the timestep and a class label."""

    def __init__(self, width=768, layers=12, heads=12, classes=1000):
        super().__init__()
        self.width = width
        self.patch = torch.nn.Conv2d(4, width, 2, stride=2)
        self.time = torch.nn.Sequential(torch.nn.Linear(256, width), torch.nn.SiLU(),
                                        torch.nn.Linear(width, width))
        self.label = torch.nn.Embedding(classes, width)
        self.blocks = torch.nn.ModuleList(_DiTBlock(width, heads) for _ in range(layers))
        self.norm = torch.nn.LayerNorm(width, elementwise_affine=False)
        self.modulation = torch.nn.Sequential(torch.nn.SiLU(), torch.nn.Linear(width, 2 * width))
        self.out = torch.nn.Linear(width, 2 * 2 * 4)

    def forward(self, x, t, y):
        b, _, height, width = x.shape
        h, w = height // 2, width // 2
        rows = torch.arange(h, device=x.device).repeat_interleave(w)
        cols = torch.arange(w, device=x.device).repeat(h)
        position = torch.cat([_sinusoid(rows, self.width // 2), _sinusoid(cols, self.width // 2)],
                             -1)
        tokens = self.patch(x).flatten(2).transpose(1, 2) + position
        c = self.time(_sinusoid(t, 256)) + self.label(y)
        for block in self.blocks:
            tokens = block(tokens, c)
        shift, scale = self.modulation(c)[:, None].chunk(2, -1)
        out = self.out(self.norm(tokens) * (1 + scale) + shift)
        return out.view(b, h, w, 2, 2, 4).permute(0, 5, 1, 3, 2, 4).reshape(b, 4, height, width)


@loop("dit_train_aspect_buckets", "a diffusion transformer (12 layers, 768 wide, adaLN, 2 x 2 "
      "patches) trained to predict noise on batch 32 of 4-channel latents, the aspect "
      "bucket drawn each step (32x32, 24x40, 40x24, 28x36, 36x28, 20x48, 48x20), bf16 "
      "autocast, AdamW")
def dit_train_aspect_buckets(device, seed):
    model = _DiT().to(device).train()
    rng, g = _seeded(device, seed)
    buckets = [(32, 32), (24, 40), (40, 24), (28, 36), (36, 28), (20, 48), (48, 20)]

    def forward():
        height, width = rng.choice(buckets)
        latents = torch.randn(32, 4, height, width, device=device, generator=g)
        noise = torch.randn(32, 4, height, width, device=device, generator=g)
        t = torch.randint(0, 1000, (32,), device=device, generator=g)
        labels = torch.randint(0, 1000, (32,), device=device, generator=g)
        kept = torch.cos((t.float() / 1000 + 0.008) / 1.008 * math.pi / 2).pow(2)[:, None, None,
                                                                                   None]
        noisy = kept.sqrt() * latents + (1 - kept).sqrt() * noise
        return torch.nn.functional.mse_loss(model(noisy, t, labels).float(), noise)
    return _train_step(model, _adamw(model), forward, bf16=True)


# An eighth batch, tuned on by no figure: instance segmentation with a drawn number of
# masks, encoder-decoder beam search, a radiance field evaluated only where an occupancy
# grid says (a sample count set by the rays drawn), and a speech transducer's 4-d joint
# tensor whose frames and targets are drawn (recorded on 2026-12-08, H100).

@loop("maskrcnn_train_varinst", "torchvision Mask R-CNN (ResNet-50 FPN), 2 images of "
      "400..800 px drawn each step with 1..16 instances each (boxes and masks), SGD with "
      "momentum, fp32")
def maskrcnn_train_varinst(device, seed):
    import torchvision
    model = torchvision.models.detection.maskrcnn_resnet50_fpn(
        weights=None, weights_backbone=None, num_classes=91).to(device).train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.005, momentum=0.9)
    return _detection_step(model, optimizer, device, seed, (1, 16), masks=True)


@loop("bart_beam_summarize", "BART-base-style encoder-decoder (6+6 layers, 768 wide) in bf16, "
      "beam search with 4 beams for 48 tokens from a source of 128..1000 tokens drawn each "
      "step, batch 4 (self- and cross-attention caches reordered by beam every token)")
def bart_beam_summarize(device, seed):
    from transformers import BartConfig, BartForConditionalGeneration
    config = BartConfig(d_model=768, encoder_layers=6, decoder_layers=6,
                        encoder_attention_heads=12, decoder_attention_heads=12,
                        encoder_ffn_dim=3072, decoder_ffn_dim=3072)
    model = BartForConditionalGeneration(config).to(device=device, dtype=torch.bfloat16).eval()
    rng = random.Random(seed)
    return _generate_step(model, device, seed, 3, config.vocab_size,
                          lambda: (4, rng.randint(128, 1000)), max_new_tokens=48,
                          min_new_tokens=48, num_beams=4, early_stopping=False,
                          pad_token_id=config.pad_token_id)


class _RadianceField(torch.nn.Module):
    """A NeRF-style MLP: a position's sine and cosine features through 8 layers of 256
    to a density and a colour."""

    def __init__(self, bands=10, width=256):
        super().__init__()
        self.bands = bands
        layers, inputs = [], 3 + 6 * bands
        for _ in range(8):
            layers += [torch.nn.Linear(inputs, width), torch.nn.ReLU()]
            inputs = width
        self.trunk = torch.nn.Sequential(*layers)
        self.out = torch.nn.Linear(width, 4)

    def forward(self, x):
        freqs = 2.0 ** torch.arange(self.bands, device=x.device) * math.pi
        angles = (x[..., None] * freqs).flatten(-2)
        return self.out(self.trunk(torch.cat([x, angles.sin(), angles.cos()], -1)))


@loop("nerf_occupancy_varsamples", "NeRF-style radiance field (8 x 256 MLP, positional "
      "encoding) trained on 4096 random rays of 96 samples; only samples in a fixed random "
      "occupancy grid's occupied cells are evaluated, so their number follows the rays "
      "drawn each step; volume rendering by cumprod, Adam, fp32")
def nerf_occupancy_varsamples(device, seed):
    model = _RadianceField().to(device).train()
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-4)
    rng, g = _seeded(device, seed)
    grid = torch.rand(64, 64, 64, device=device, generator=g) < 0.3
    rays, samples = 4096, 96

    def forward():
        centre = torch.tensor([rng.uniform(-0.6, 0.6) for _ in range(3)], device=device)
        origins = centre + 0.2 * torch.randn(rays, 3, device=device, generator=g)
        directions = torch.nn.functional.normalize(
            torch.randn(rays, 3, device=device, generator=g), dim=-1)
        t = torch.linspace(0.05, 1.5, samples, device=device)
        points = origins[:, None] + t[None, :, None] * directions[:, None]
        cells = ((points + 1) * 32).long()
        inside = ((cells >= 0) & (cells < 64)).all(-1)
        cells = cells.clamp(0, 63)
        kept = inside & grid[cells[..., 0], cells[..., 1], cells[..., 2]]
        out = model(points[kept])
        sigma = torch.zeros(rays, samples, device=device).masked_scatter(kept,
                                                                         torch.relu(out[:, 0]))
        colour = torch.zeros(rays, samples, 3, device=device).masked_scatter(
            kept[..., None].expand(-1, -1, 3), torch.sigmoid(out[:, 1:]))
        alpha = 1 - torch.exp(-sigma * (t[1] - t[0]))
        transmitted = torch.cumprod(torch.cat([torch.ones(rays, 1, device=device),
                                               1 - alpha[:, :-1] + 1e-10], -1), -1)
        rgb = ((alpha * transmitted)[..., None] * colour).sum(1)
        return torch.nn.functional.mse_loss(rgb, torch.rand(rays, 3, device=device, generator=g))
    return _train_step(model, optimizer, forward)


class _Transducer(torch.nn.Module):
    """A speech transducer's shape: a strided Conv1d subsampling (4x) and a transformer
    encoder over mel features, a stateless prediction network (an embedding and a causal
    convolution over the last two tokens), and a joint network over every (frame, token)
    pair."""

    def __init__(self, vocab=1024, width=512):
        super().__init__()
        self.subsample = torch.nn.Sequential(
            torch.nn.Conv1d(80, width, 3, stride=2, padding=1), torch.nn.GELU(),
            torch.nn.Conv1d(width, width, 3, stride=2, padding=1), torch.nn.GELU())
        layer = torch.nn.TransformerEncoderLayer(width, 8, 4 * width, batch_first=True,
                                                 norm_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, 6, enable_nested_tensor=False)
        self.embed = torch.nn.Embedding(vocab, width)
        self.predictor = torch.nn.Conv1d(width, width, 2, padding=1)
        self.joint = torch.nn.Linear(width, vocab)

    def forward(self, features, targets):
        encoded = self.encoder(self.subsample(features).transpose(1, 2))
        predicted = self.predictor(self.embed(targets).transpose(1, 2))[..., :targets.shape[1]]
        return self.joint(torch.tanh(encoded[:, :, None] + predicted.transpose(1, 2)[:, None]))


@loop("transducer_joint_varlen", "speech-transducer-style training: Conv1d subsampling and a "
      "6-layer transformer encoder over 80 mel features, a stateless prediction network, "
      "and the joint network's 4-d tensor (batch 8 x frames x target tokens x 1024) with "
      "100..400 frames (after subsampling) and 10..60 target tokens drawn each step; a "
      "cross-entropy over the joint stands in for the transducer loss; bf16 autocast, AdamW")
def transducer_joint_varlen(device, seed):
    model = _Transducer().to(device).train()
    rng, g = _seeded(device, seed)

    def forward():
        frames, length = rng.randint(100, 400), rng.randint(10, 60)
        features = torch.randn(8, 80, 4 * frames, device=device, generator=g)
        targets = torch.randint(1, 1024, (8, length), device=device, generator=g)
        logits = model(features, targets)
        labels = torch.randint(0, 1024, logits.shape[:3], device=device, generator=g)
        return torch.nn.functional.cross_entropy(logits.flatten(0, 2).float(), labels.flatten())
    return _train_step(model, _adamw(model), forward, bf16=True)
