"""A bidirectional GRU sequence classifier in Flax Linen: `nn.RNN(nn.GRUCell)` forward and
reversed over 128 time steps (each a `lax.scan` over time), batch 256, hidden 256, Adam, donated,
warm, annotated. The scans run over time, not over layers: there are no layers to unroll."""
import sys

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax

T, BATCH, FEATURES, HIDDEN = 128, 256, 64, 256


class BiGRU(nn.Module):
    @nn.compact
    def __call__(self, x):
        fwd = nn.RNN(nn.GRUCell(HIDDEN))(x)
        bwd = nn.RNN(nn.GRUCell(HIDDEN), reverse=True, keep_order=True)(x)
        h = jnp.concatenate([fwd[:, -1], bwd[:, 0]], axis=-1)
        return nn.Dense(5)(h)


def main(logdir):
    model = BiGRU()
    key = jax.random.PRNGKey(2)
    x = jax.random.normal(key, (BATCH, T, FEATURES))
    labels = jax.random.randint(key, (BATCH,), 0, 5)
    params = model.init(key, x)["params"]
    tx = optax.adam(1e-3)
    opt_state = tx.init(params)

    def train_step(params, opt_state, x, labels):
        def loss_fn(p):
            return optax.softmax_cross_entropy_with_integer_labels(model.apply({"params": p}, x), labels).mean()
        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    step = jax.jit(train_step, donate_argnums=(0, 1))
    params, opt_state, loss = step(params, opt_state, x, labels)
    loss.block_until_ready()
    with jax.profiler.trace(logdir):
        for i in range(3):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                params, opt_state, loss = step(params, opt_state, x, labels)
        loss.block_until_ready()


if __name__ == "__main__":
    main(sys.argv[1])
