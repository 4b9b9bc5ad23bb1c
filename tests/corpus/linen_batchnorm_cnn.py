"""A Flax Linen CNN with BatchNorm (mutable batch_stats carried in the train state), SGD
momentum via `flax.training.train_state`, donated, warm, annotated. Clean."""
import sys

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax
from flax.training import train_state


class Net(nn.Module):
    @nn.compact
    def __call__(self, x, train: bool):
        for feats in (16, 32):
            x = nn.Conv(feats, (3, 3), use_bias=False)(x)
            x = nn.relu(nn.BatchNorm(use_running_average=not train)(x))
            x = nn.avg_pool(x, (2, 2), (2, 2))
        return nn.Dense(10)(x.mean(axis=(1, 2)))


class State(train_state.TrainState):
    batch_stats: dict


def main(logdir):
    model = Net()
    x = jax.random.normal(jax.random.PRNGKey(0), (32, 32, 32, 3))
    y = jax.random.randint(jax.random.PRNGKey(1), (32,), 0, 10)
    variables = model.init(jax.random.PRNGKey(2), x, train=False)
    state = State.create(apply_fn=model.apply, params=variables["params"],
                         batch_stats=variables["batch_stats"], tx=optax.sgd(0.1, momentum=0.9))

    def train_step(state, x, y):
        def loss_fn(params):
            logits, updates = state.apply_fn({"params": params, "batch_stats": state.batch_stats}, x,
                                             train=True, mutable=["batch_stats"])
            return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean(), updates
        (loss, updates), grads = jax.value_and_grad(loss_fn, has_aux=True)(state.params)
        state = state.apply_gradients(grads=grads).replace(batch_stats=updates["batch_stats"])
        return state, loss

    train_step = jax.jit(train_step, donate_argnums=(0,))
    state, loss = train_step(state, x, y)
    loss.block_until_ready()
    with jax.profiler.trace(logdir):
        for i in range(4):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                state, loss = train_step(state, x, y)
        loss.block_until_ready()


if __name__ == "__main__":
    main(sys.argv[1])
