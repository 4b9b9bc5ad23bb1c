"""A VGG-style Flax Linen CNN whose stages differ in shape (32 -> 64 -> 128 channels, halving the
resolution each stage), batch 128 of 64x64 images, SGD with momentum, donated, warm, annotated.
Its activations dominate memory; the layers cannot be stacked into a scan (their shapes differ)."""
import sys

import flax.linen as nn
import jax
import jax.numpy as jnp
import optax


class ConvStage(nn.Module):
    channels: int

    @nn.compact
    def __call__(self, x):
        x = nn.relu(nn.Conv(self.channels, (3, 3))(x))
        x = nn.relu(nn.Conv(self.channels, (3, 3))(x))
        return nn.max_pool(x, (2, 2), strides=(2, 2))


class VGGish(nn.Module):
    @nn.compact
    def __call__(self, x):
        for channels in (32, 64, 128):
            x = ConvStage(channels)(x)
        x = x.mean(axis=(1, 2))
        return nn.Dense(10)(x)


def main(logdir):
    model = VGGish()
    key = jax.random.PRNGKey(4)
    images = jax.random.normal(key, (128, 64, 64, 3))
    labels = jax.random.randint(key, (128,), 0, 10)
    params = model.init(key, images)["params"]
    tx = optax.sgd(0.01, momentum=0.9)
    opt_state = tx.init(params)

    def train_step(params, opt_state, images, labels):
        def loss_fn(p):
            logits = model.apply({"params": p}, images)
            return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()
        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    step = jax.jit(train_step, donate_argnums=(0, 1))
    params, opt_state, loss = step(params, opt_state, images, labels)
    loss.block_until_ready()
    with jax.profiler.trace(logdir):
        for i in range(3):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                params, opt_state, loss = step(params, opt_state, images, labels)
        loss.block_until_ready()


if __name__ == "__main__":
    main(sys.argv[1])
