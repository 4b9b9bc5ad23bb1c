"""A small Flax Linen Transformer language model, 8 blocks under `nn.scan`, no remat, AdamW,
donated, warm, annotated: every block's activations are stacked for the backward pass."""
import sys

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

REMAT = False
VOCAB, SEQ, DIM, HEADS, LAYERS, BATCH = 512, 128, 128, 4, 8, 32


class Block(nn.Module):
    @nn.compact
    def __call__(self, x, _):
        h = nn.LayerNorm()(x)
        x = x + nn.MultiHeadDotProductAttention(num_heads=HEADS)(h, h, mask=nn.make_causal_mask(jnp.ones(x.shape[:2])))
        h = nn.LayerNorm()(x)
        x = x + nn.Dense(DIM)(nn.gelu(nn.Dense(4 * DIM)(h)))
        return x, None


class LM(nn.Module):
    @nn.compact
    def __call__(self, tokens):
        x = nn.Embed(VOCAB, DIM)(tokens)
        block = nn.remat(Block, prevent_cse=False) if REMAT else Block
        x, _ = nn.scan(block, variable_axes={"params": 0}, split_rngs={"params": True}, length=LAYERS)()(x, None)
        return nn.Dense(VOCAB)(nn.LayerNorm()(x))


def main(logdir):
    model = LM()
    tokens = jax.random.randint(jax.random.PRNGKey(0), (BATCH, SEQ + 1), 0, VOCAB)
    params = model.init(jax.random.PRNGKey(1), tokens[:, :-1])["params"]
    tx = optax.adamw(3e-4)
    opt_state = tx.init(params)

    def train_step(params, opt_state, tokens):
        def loss_fn(p):
            logits = model.apply({"params": p}, tokens[:, :-1])
            return optax.softmax_cross_entropy_with_integer_labels(logits, tokens[:, 1:]).mean()
        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    train_step = jax.jit(train_step, donate_argnums=(0, 1))
    params, opt_state, loss = train_step(params, opt_state, tokens)
    loss.block_until_ready()
    with jax.profiler.trace(logdir):
        for i in range(3):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                params, opt_state, loss = train_step(params, opt_state, tokens)
        loss.block_until_ready()


if __name__ == "__main__":
    main(sys.argv[1])
