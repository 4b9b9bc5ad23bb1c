"""An MLP trained on batches that the host augments in NumPy before every step (random crops,
flips, per-image normalisation of 256 images: tens of ms on the host), while the jitted step
itself takes a few ms. No syncs: the loop is paced by the host's NumPy work, and the device
sits idle most of each step waiting for the next batch."""
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax

tx = optax.sgd(1e-2, momentum=0.9)


def train_step(params, opt_state, x, y):
    def loss_fn(p):
        h = jax.nn.relu(x @ p["w1"])
        return optax.softmax_cross_entropy_with_integer_labels(h @ p["w2"], y).mean()
    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, opt_state = tx.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, loss


def augment(images, rng, passes=4):
    """Random 28x28 crops of 32x32 images, random flips, colour jitter with noise (a few passes),
    per-image normalisation: the kind of host-side pipeline that paces a training loop."""
    n = len(images)
    i, j = rng.integers(0, 5, (2, n))
    rows = i[:, None] + np.arange(28)
    cols = j[:, None] + np.arange(28)
    crops = images[np.arange(n)[:, None, None], rows[:, :, None], cols[:, None, :]]
    flip = rng.random(n) < 0.5
    crops[flip] = crops[flip][:, :, ::-1]
    for _ in range(passes):
        crops = np.clip(crops * rng.uniform(0.9, 1.1, (n, 1, 1, 3)) + rng.normal(0, 0.01, crops.shape), 0, 1)
    mean = crops.mean(axis=(1, 2, 3), keepdims=True)
    std = crops.std(axis=(1, 2, 3), keepdims=True)
    return ((crops - mean) / (std + 1e-6)).astype(np.float32).reshape(n, -1)


def setup():
    """The data set, the parameters and the optimizer's state (benchmarks/host_idle_truth.py times the
    same loop without the profiler)."""
    rng = np.random.default_rng(0)
    images = rng.random((256, 32, 32, 3), dtype=np.float32)
    labels = rng.integers(0, 10, 256)
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    params = {"w1": jax.random.normal(keys[0], (28 * 28 * 3, 512)) * 0.02,
              "w2": jax.random.normal(keys[1], (512, 10)) * 0.05}
    return rng, images, labels, params, tx.init(params)


def main(logdir):
    rng, images, labels, params, opt_state = setup()
    step = jax.jit(train_step, donate_argnums=(0, 1))
    params, opt_state, loss = step(params, opt_state, augment(images, rng), labels)
    loss.block_until_ready()
    with jax.profiler.trace(logdir):
        for i in range(6):
            with jax.profiler.StepTraceAnnotation("train", step_num=i):
                params, opt_state, loss = step(params, opt_state, augment(images, rng), labels)
        loss.block_until_ready()


if __name__ == "__main__":
    main(sys.argv[1])
