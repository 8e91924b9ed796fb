"""The DCGAN example: two models in one graph, batch norm reused, Adam's betas."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from asgrad.examples import dcgan


def test_a_short_run_brings_the_samples_closer_to_held_out_digits() -> None:
    results = dcgan.train(steps=300, batch_size=32, seed=0)
    # Untrained, the generator's samples are far from the digits (a Fréchet distance
    # in pixel space of about 46); 300 steps cut it at least threefold (to 5.4-6.2 on
    # the machines tried: a GAN's path depends on the BLAS, so the margin is wide; at
    # 120 steps one BLAS reached 14.5 and another 16.3, across the line).
    assert results["frechet_after"] < results["frechet_before"] / 3, results
    assert np.isfinite(results["loss_d"])
    assert np.isfinite(results["loss_g"])
    samples = results["samples"]
    assert samples.shape == (360, 1, 8, 8)
    assert samples.min() >= -1.0
    assert samples.max() <= 1.0
    assert samples.std(axis=0).mean() > 0.05  # not one image repeated


def test_frechet_distance_is_zero_for_one_set_and_grows_with_a_shift() -> None:
    x = np.random.default_rng(0).normal(size=(500, 4))
    assert dcgan.frechet_distance(x, x) == pytest.approx(0.0, abs=1e-6)
    assert dcgan.frechet_distance(x, x + 1.0) == pytest.approx(4.0, rel=1e-6)


def test_weights_init_draws_dcgan_s_distributions() -> None:
    net = dcgan.Discriminator(ndf=64).apply(dcgan.weights_init)  # as PyTorch's, unseeded
    conv, bn = net.main[2], net.main[3]
    assert abs(float(conv.weight.value.std()) - 0.02) < 0.002
    assert abs(float(bn.weight.value.mean()) - 1.0) < 0.01
    assert not bn.bias.value.any()


def test_cli_prints_one_json_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert dcgan.main(["--steps", "2", "--batch-size", "16", "--quiet"]) == 0
    line = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert line["example"] == "dcgan"
    assert line["steps"] == 2
    assert "samples" not in line


def test_two_steps_match_pytorch_s_dcgan_loop(torch_reference: Callable[..., Any]) -> None:
    # PyTorch's examples/dcgan loop body, run on the same weights and batches in
    # float64: the losses, D(x), D(G(z)) and every parameter and running statistic of
    # the discriminator agree (its batch norm runs three times per iteration in both).
    # PyTorch's side runs in torch_reference: saved as a fixture, live where installed.
    nz, ngf, ndf, b = 4, 4, 4, 8
    rng = np.random.default_rng(0)
    batches = [(rng.uniform(-1, 1, (b, 1, 8, 8)), rng.standard_normal((b, nz, 1, 1))) for _ in "ab"]

    def theirs(torch: Any, batches: list[Any]) -> Any:
        tnn = torch.nn
        ref_g = tnn.Sequential(
            tnn.ConvTranspose2d(nz, ngf * 2, 2, 1, 0, bias=False),
            tnn.BatchNorm2d(ngf * 2),
            tnn.ReLU(True),
            tnn.ConvTranspose2d(ngf * 2, ngf, 4, 2, 1, bias=False),
            tnn.BatchNorm2d(ngf),
            tnn.ReLU(True),
            tnn.ConvTranspose2d(ngf, 1, 4, 2, 1, bias=False),
            tnn.Tanh(),
        ).double()
        ref_d = tnn.Sequential(
            tnn.Conv2d(1, ndf, 4, 2, 1, bias=False),
            tnn.LeakyReLU(0.2, inplace=True),
            tnn.Conv2d(ndf, ndf * 2, 4, 2, 1, bias=False),
            tnn.BatchNorm2d(ndf * 2),
            tnn.LeakyReLU(0.2, inplace=True),
            tnn.Conv2d(ndf * 2, 1, 2, 1, 0, bias=False),
            tnn.Sigmoid(),
        ).double()
        initial = (
            {k: v.detach().clone() for k, v in ref_g.state_dict().items()},
            {k: v.detach().clone() for k, v in ref_d.state_dict().items()},
        )
        ref_opt_d = torch.optim.Adam(ref_d.parameters(), lr=0.01, betas=(0.5, 0.999))
        ref_opt_g = torch.optim.Adam(ref_g.parameters(), lr=0.01, betas=(0.5, 0.999))
        bce = tnn.BCELoss()
        steps = []
        for real, noise in batches:
            ref_opt_d.zero_grad()
            out = ref_d(torch.tensor(real)).view(-1)
            err_real = bce(out, torch.ones(b, dtype=torch.float64))
            err_real.backward()
            d_x = out.mean().item()
            fake = ref_g(torch.tensor(noise))
            out = ref_d(fake.detach()).view(-1)
            err_fake = bce(out, torch.zeros(b, dtype=torch.float64))
            err_fake.backward()
            d_g_z1 = out.mean().item()
            ref_opt_d.step()
            ref_opt_g.zero_grad()
            out = ref_d(fake).view(-1)
            err_g = bce(out, torch.ones(b, dtype=torch.float64))
            err_g.backward()
            ref_opt_g.step()
            steps.append(
                ([(err_real + err_fake).item(), d_x, d_g_z1], [err_g.item(), out.mean().item()])
            )
        final_d = {k: v.detach().clone() for k, v in ref_d.state_dict().items()}
        final_g = {k: v.detach().clone() for k, v in ref_g.named_parameters()}
        return initial, steps, final_d, final_g

    (initial_g, initial_d), steps, final_d, final_g = torch_reference(theirs, batches)
    net_g, net_d = dcgan.Generator(nz, ngf).double(), dcgan.Discriminator(ndf).double()
    dcgan.nn.load_torch_state_dict(net_g.main, initial_g)
    dcgan.nn.load_torch_state_dict(net_d.main, initial_d)
    opt_d = dcgan.nn.Adam(net_d.parameters(), lr=0.01, betas=(0.5, 0.999))
    opt_g = dcgan.nn.Adam(net_g.parameters(), lr=0.01, betas=(0.5, 0.999))
    step_d, step_g = dcgan.build_steps(net_g, net_d, opt_d, opt_g, b, nz, "float64")
    for (real, noise), (want_d, want_g) in zip(batches, steps, strict=True):
        got_d = step_d(real=real, noise=noise)
        got_g = step_g(noise=noise)
        np.testing.assert_allclose([float(v) for v in got_d], want_d, rtol=1e-9)
        np.testing.assert_allclose([float(v) for v in got_g], want_g, rtol=1e-9)
    for name, value in final_d.items():
        mine = dcgan.nn.torch_state_dict(net_d.main)[name]
        np.testing.assert_allclose(mine, value, rtol=1e-7, atol=1e-10, err_msg=name)
    for name, value in final_g.items():
        mine = dcgan.nn.torch_state_dict(net_g.main)[name]
        np.testing.assert_allclose(mine, value, rtol=1e-7, atol=1e-10, err_msg=name)
