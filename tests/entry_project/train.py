"""A user's training script, as `advisor check --entry train.py:make_step` checks it (docs/check.md,
docs/advisor-check.yml): a small Flax MLP classifier trained with optax, its train step jitted with
the state donated. `make_step()` builds the model and its state once and returns a function that runs
one training step, the state carried inside, and returns the loss to wait on.

tests/test_entry_check.py checks a copy of this folder against itself (it passes) and against a
copy with EXTRA_LAYERS = 1, as a pull request would change it: one more hidden layer of the same
width, about 1.2 times the step's FLOPs, measured x1.3 (it fails)."""
import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
from model_config import BATCH, FEATURES, HIDDEN, LAYERS

EXTRA_LAYERS = 0


class MLP(nn.Module):
    layers: int

    @nn.compact
    def __call__(self, x):
        for _ in range(self.layers):
            x = nn.gelu(nn.Dense(HIDDEN)(x))
        return nn.Dense(10)(x)


def make_step():
    step, (params, opt_state, x, y) = make_variant(EXTRA_LAYERS)
    state = {"params": params, "opt_state": opt_state}

    def one_step():
        state["params"], state["opt_state"], loss = step(state["params"], state["opt_state"], x, y)
        return loss
    return one_step


def make_variant(extra_layers=0):
    """advisor.verify's shape: (step, args) for the model with `extra_layers` more hidden layers; each
    timed call runs the donating step on a fresh copy of the state."""
    model = MLP(LAYERS + extra_layers)
    kx, kp = jax.random.split(jax.random.PRNGKey(0))
    x = jax.random.normal(kx, (BATCH, FEATURES))
    y = jnp.arange(BATCH) % 10
    params = model.init(kp, x)
    tx = optax.adam(1e-3)

    def train_step(params, opt_state, x, y):
        def loss_fn(p):
            return optax.softmax_cross_entropy_with_integer_labels(model.apply(p, x), y).mean()
        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return jax.jit(train_step, donate_argnums=(0, 1)), (params, tx.init(params), x, y)
