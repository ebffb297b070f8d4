"""The mass matrix of `dynamics` (TFP's `momentum_distribution` convention)
against numpy: grad K(r) = M^{-1} r (`velocity`), K(r) = r^T M^{-1} r / 2,
draws of N(0, M), and every Hamiltonian update with a diagonal, a dense and
a low-rank-plus-diagonal M
over a two-part state with a chain axis: SGHMC's Euler and splitting steps
(friction on r, noise N(0, 2 C T h M), drift h M^{-1} r'), SGNHT (thermostat
on r^T M^{-1} r / d), AMAGOLD's proposal start, leapfrog step and energy
accumulator (the log reverse-over-forward density of the N(0, 4 eps beta M)
kick noise); the argument checks that go with a mass matrix."""

import functools

import numpy as np
import pytest
import scipy.stats
import tensorflow as tf
import tensorflow_probability as tfp

from tfp_sgmcmc import dynamics
from tfp_sgmcmc.dynamics import hamiltonian
from .reference import CHAINS, SHAPES, TOL, check, const, draws
from .reference import per_chain_sum

tfd, tfb = tfp.distributions, tfp.bijectors

SEED = tf.constant([321, -45])
# Per part: the 4 coordinates of one chain's part (the second part is 2 x 2).
DIAGONAL = [np.array([1e-2, 0.5, 3., 40.]), np.array([[2., 1e-3], [7., 0.25]])]


def _dense(seed, scale):
  rng = np.random.default_rng(seed)
  a = rng.normal(size=(4, 4))
  return scale * (a @ a.T + 0.5 * np.eye(4))


DENSE = [_dense(1, 0.3), _dense(2, 5.)]


def _low_rank(seed, scale):
  """(s, V, lambda) of M^{-1} = S (I + V (Lambda - I) V^T) S, rank 2, one
  direction stretched and one squeezed."""
  rng = np.random.default_rng(seed)
  basis, _ = np.linalg.qr(rng.normal(size=(4, 2)))
  return scale * rng.uniform(0.3, 3., 4), basis, np.array([30., 0.02])


LOW_RANK = [_low_rank(3, 0.5), _low_rank(4, 2.)]


def low_rank_inverse_mass(s, basis, lam):
  return np.diag(s) @ (np.eye(len(s)) + basis @ np.diag(lam - 1.) @
                       basis.T) @ np.diag(s)


# Built once per kind: TFP's distributions are slow to build, and no test
# changes them.
@functools.cache
def masses(kind):
  """(M per part as a 4 x 4 matrix over the part's flattened coordinates,
  a momentum distribution N(0, M) for the float64 SHAPES state)."""
  state = const(draws(0))
  if kind == "diagonal":
    dist = hamiltonian.diagonal_momentum_distribution(
        state, batch_ndims=1, inverse_mass=[tf.constant(v) for v in DIAGONAL])
    return [np.diag(1. / v.reshape(-1)) for v in DIAGONAL], dist
  if kind == "low_rank":
    make = dynamics.mass.low_rank_momentum_distribution
    dist = tfd.JointDistributionSequential([
        make(*LOW_RANK[0]), tfb.Reshape([2, 2])(make(*LOW_RANK[1]))])
    return ([np.linalg.inv(low_rank_inverse_mass(*p)) for p in LOW_RANK],
            hamiltonian.batch_momentum_distribution(dist, [CHAINS]))
  dist = tfd.JointDistributionSequential([
      tfd.MultivariateNormalTriL(
          scale_tril=tf.linalg.cholesky(tf.constant(DENSE[0]))),
      tfb.Reshape([2, 2])(tfd.MultivariateNormalTriL(
          scale_tril=tf.linalg.cholesky(tf.constant(DENSE[1]))))])
  return DENSE, hamiltonian.batch_momentum_distribution(dist, [CHAINS])


def inverse_times(mass, parts):
  """M^{-1} r per part, r of shape [CHAINS, ...]."""
  return [np.reshape(np.reshape(p, (CHAINS, -1)) @ np.linalg.inv(m).T,
                     p.shape) for m, p in zip(mass, parts)]


KINDS = ["diagonal", "dense", "low_rank"]


@pytest.mark.parametrize("kind", KINDS)
def test_velocity_is_the_inverse_mass_times_the_momentum(kind):
  mass, dist = masses(kind)
  r = draws(3, 2.)
  check(hamiltonian.velocity(const(r), dist), inverse_times(mass, r),
        tf.float64)


def test_identity_mass_is_a_no_op():
  r = const(draws(3))
  assert hamiltonian.velocity(r, None) is r
  got = hamiltonian.sample_momentum(None, r, SEED)
  check(got, [z.numpy() for z in dynamics.standard_normal_like(r, SEED)],
        tf.float64)


@pytest.mark.parametrize("kind", KINDS)
def test_kinetic_energy_is_half_r_inverse_mass_r(kind):
  mass, dist = masses(kind)
  r = draws(4, 2.)
  got = dynamics.kinetic_energy(const(r), batch_ndims=1,
                                momentum_distribution=dist)
  expected = per_chain_sum([0.5 * p * v for p, v in
                            zip(r, inverse_times(mass, r))])
  np.testing.assert_allclose(got, expected, **TOL[tf.float64])


@pytest.mark.parametrize("kind", KINDS)
def test_sample_momentum_draws_n_0_m_shaped_like_the_state(kind):
  # Diagonal form: the engine's normals z scaled to z / sqrt(M^{-1});
  # low rank: S^{-1} (z + V (Lambda^{-1/2} - I) V^T z); otherwise the
  # distribution's own draw. Either way N(0, M) per chain.
  mass, dist = masses(kind)
  like = const(draws(5))
  got = hamiltonian.sample_momentum(dist, like, SEED)
  z = dynamics.standard_normal_like(like, SEED)
  if kind == "diagonal":
    expected = [x.numpy() / np.sqrt(v) for x, v in zip(z, DIAGONAL)]
  elif kind == "low_rank":
    expected = []
    for x, (s, basis, lam) in zip(z, LOW_RANK):
      flat = x.numpy().reshape(CHAINS, -1)
      flat = (flat + (flat @ basis) * (lam ** -0.5 - 1.) @ basis.T) / s
      expected.append(flat.reshape(x.shape))
  else:
    expected = [x.numpy() for x in dist.sample(seed=SEED)]
  check(got, expected, tf.float64)
  n = 21000
  many = [tf.zeros((n,) + s[1:], tf.float64) for s in SHAPES]
  if kind == "diagonal":
    many_dist = hamiltonian.diagonal_momentum_distribution(
        many, batch_ndims=1, inverse_mass=[tf.constant(v) for v in DIAGONAL])
  else:
    many_dist = hamiltonian.batch_momentum_distribution(
        dist.copy(model=[m.distribution for m in dist.model]), [n])
  for part, m, s in zip(hamiltonian.sample_momentum(many_dist, many, SEED),
                        mass, SHAPES):
    assert part.shape == (n,) + s[1:]
    x = np.reshape(part.numpy(), (n, -1))
    cov = x.T @ x / len(x)
    # Var of a second moment of a Gaussian: M_ii M_jj + M_ij^2.
    se = np.sqrt((np.outer(np.diag(m), np.diag(m)) + m ** 2) / len(x))
    assert np.all(np.abs(cov - m) < 4. * se), (cov, m)
    assert np.all(np.abs(x.mean(0)) < 4. * np.sqrt(np.diag(m) / len(x)))


# --- SGHMC and SGNHT ----------------------------------------------------------


def _noise(dist, r, seed):
  _, noise_seed, _ = dynamics.derive_seeds(seed, 3)
  return [z.numpy() for z in hamiltonian.sample_momentum(dist, r, noise_seed)]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("refresh", [False, True])
def test_sghmc_euler_update_with_a_mass_matrix(kind, refresh):
  # r' = r - h g - h C r + sqrt(2 C T h) z, z ~ N(0, M);
  # theta' = theta + h M^{-1} r'. A refreshing step folds r ~ N(0, T0 M)
  # into the noise: scale sqrt((1 - h C)^2 T0 + 2 C T h).
  mass, dist = masses(kind)
  theta, r, g = draws(10), draws(11), draws(12, 3.)
  h, c, t, t0 = 0.07, 2.3, 0.4, 0.7
  got_theta, got_r = dynamics.sghmc_update(
      const(theta), const(r), const(g), h, c, 0., t, "euler", SEED,
      refresh=tf.constant(refresh), refresh_temperature=t0,
      momentum_distribution=dist)
  z = _noise(dist, const(r), SEED)
  if refresh:
    new_r = [-h * d + np.sqrt((1 - h * c) ** 2 * t0 + 2 * c * t * h) * x
             for d, x in zip(g, z)]
  else:
    new_r = [m - h * d - h * c * m + np.sqrt(2 * c * t * h) * x
             for m, d, x in zip(r, g, z)]
  check(got_r, new_r, tf.float64)
  check(got_theta, [x + h * v for x, v in
                    zip(theta, inverse_times(mass, new_r))], tf.float64)


@pytest.mark.parametrize("kind", KINDS)
def test_sghmc_splitting_update_with_a_mass_matrix(kind):
  # theta1 = theta + M^{-1} r h/2; r' = e^{-Ch/2}(e^{-Ch/2} r - h g(theta1)
  # + sqrt(2 C T h) z); theta' = theta1 + M^{-1} r' h/2.
  mass, dist = masses(kind)
  theta, r, g = draws(13), draws(14), draws(15, 3.)
  h, c, t = 0.07, 2.3, 0.4
  theta1 = hamiltonian.gradient_position(const(theta), const(r), h,
                                         "splitting", dist)
  expected1 = [x + 0.5 * h * v for x, v in zip(theta, inverse_times(mass, r))]
  check(theta1, expected1, tf.float64)
  got_theta, got_r = dynamics.sghmc_update(
      theta1, const(r), const(g), h, c, 0., t, "splitting", SEED,
      momentum_distribution=dist)
  decay = np.exp(-0.5 * c * h)
  new_r = [decay * (decay * m - h * d + np.sqrt(2 * c * t * h) * x)
           for m, d, x in zip(r, g, _noise(dist, const(r), SEED))]
  check(got_r, new_r, tf.float64)
  check(got_theta, [x + 0.5 * h * v for x, v in
                    zip(expected1, inverse_times(mass, new_r))], tf.float64)


@pytest.mark.parametrize("kind", KINDS)
def test_refresh_momentum_draws_sqrt_t_times_n_0_m(kind):
  _, dist = masses(kind)
  r = const(draws(16))
  got = hamiltonian.refresh_momentum(r, tf.constant(0), None, 0.3, SEED, dist)
  _, _, momentum_seed = dynamics.derive_seeds(SEED, 3)
  z = hamiltonian.sample_momentum(dist, r, momentum_seed)
  check(got, [np.sqrt(0.3) * x.numpy() for x in z], tf.float64)
  kept = hamiltonian.refresh_momentum(r, tf.constant(1), None, 0.3, SEED,
                                      dist)
  check(kept, [x.numpy() for x in r], tf.float64)


@pytest.mark.parametrize("kind", KINDS)
def test_sgnht_step_with_a_mass_matrix(kind):
  # r' = r - h xi r - h g + sqrt(2 A h T) z, z ~ N(0, M);
  # theta' = theta + h M^{-1} r'; xi' = xi + h (r'^T M^{-1} r' / d - T).
  mass, dist = masses(kind)
  theta, r, g, z = draws(20), draws(21), draws(22, 2.), draws(23)
  xi = np.array([0.3, 1.1, -0.2])
  h, a, t = 0.05, 0.8, 0.6
  got_theta, got_r, got_xi = dynamics.sgnht_step(
      const(theta), const(r), tf.constant(xi), const(g), h, const(z), a, t,
      momentum_distribution=dist)
  new_r = [m - h * xi.reshape((-1,) + (1,) * (m.ndim - 1)) * m - h * d
           + np.sqrt(2 * a * h * t) * x for m, d, x in zip(r, g, z)]
  v = inverse_times(mass, new_r)
  check(got_r, new_r, tf.float64)
  check(got_theta, [x + h * w for x, w in zip(theta, v)], tf.float64)
  two_k = per_chain_sum([m * w for m, w in zip(new_r, v)])
  np.testing.assert_allclose(got_xi, xi + h * (two_k / 8. - t),
                             **TOL[tf.float64])


def test_sghmc_parameters_refuse_a_noise_estimate_with_a_mass_matrix():
  _, dist = masses("diagonal")
  hamiltonian.check_sghmc_parameters(1., 0., "euler", None, 1., dist)
  for b_hat in (0.1, "empirical_fisher", [0., 0.2]):
    with pytest.raises(ValueError, match="noise_estimate.*momentum_"
                       "distribution.*noise_estimate=0"):
      hamiltonian.check_sghmc_parameters(1., b_hat, "euler", None, 1., dist)


def test_check_momentum_distribution_refuses_a_draw_not_shaped_like_the_state():
  _, dist = masses("diagonal")
  state = const(draws(0))
  assert hamiltonian.check_momentum_distribution(dist, state, [CHAINS],
                                                 "SGHMC") is not None
  with pytest.raises(ValueError, match=r"momentum_distribution` of SGHMC "
                     r"draws momenta of shapes \[\[3, 4\], \[3, 2, 2\]\].*"
                     r"state has shapes \[\[3, 5\]\]"):
    hamiltonian.check_momentum_distribution(
        dist, [tf.zeros([3, 5], tf.float64)], [CHAINS], "SGHMC")
  with pytest.raises(ValueError, match="dtypes"):
    hamiltonian.check_momentum_distribution(
        dist, [tf.cast(p, tf.float32) for p in state], [CHAINS], "SGHMC")
  with pytest.raises(TypeError, match="must be a tfp.distributions"):
    hamiltonian.check_momentum_distribution("identity", state, [CHAINS],
                                            "SGHMC")


@pytest.mark.parametrize("kind", ["diagonal", "dense", "low_rank"])
def test_checking_a_batched_distribution_traces_no_draw(kind):
  # The builders' and TFP's batched form (a sequence of batch broadcasts):
  # a draw's parts are each part's batch and event shape, read without
  # tracing a draw from the joint distribution's model, which cost as
  # much as tracing a step; a misfit is still refused.
  _, dist = masses(kind)
  added = []

  def check(*state):
    graph = tf.compat.v1.get_default_graph()
    before = len(graph.get_operations())
    checked = hamiltonian.check_momentum_distribution(
        dist, list(state), [CHAINS], "SGHMC")
    added.append(len(graph.get_operations()) - before)
    assert checked is dist
    return state

  tf.function(check, autograph=False).get_concrete_function(
      *[tf.TensorSpec(shape, tf.float64) for shape in SHAPES])
  assert added == [0]
  with pytest.raises(ValueError, match=r"draws momenta of shapes "
                     r"\[\[3, 4\], \[3, 2, 2\]\].*state has shapes "
                     r"\[\[3, 4\], \[3, 4\]\]"):
    hamiltonian.check_momentum_distribution(
        dist, [tf.zeros([3, 4], tf.float64)] * 2, [CHAINS], "SGHMC")


# --- AMAGOLD ------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_accumulator_increment_is_the_reverse_over_forward_noise_density(kind):
  # One kick r -> r' with eta ~ N(0, 4 eps beta M): K(r') - K(r) + increment
  # equals log N(eta_rev) - log N(eta_fwd), K(r) = r^T M^{-1} r / 2, written
  # with scipy's multivariate normal density of the whole part.
  mass, dist = masses(kind)
  eps, beta = 0.3, 0.9
  a = eps * beta
  g, r, z = draws(30, 2.), draws(31), draws(32)
  r_new = dynamics.amagold_momentum(const(r), const(g), eps, beta,
                                    const(z))
  rho = dynamics.energy_accumulator_increment(
      const(g), const(r), r_new, eps, batch_ndims=1,
      momentum_distribution=dist).numpy()
  r_new = [p.numpy() for p in r_new]
  log_ratio = np.zeros(CHAINS)
  kinetic = np.zeros(CHAINS)
  for d, m, m_new, cov in zip(g, r, r_new, mass):
    flat = lambda x: np.reshape(x, (CHAINS, -1))  # noqa: E731
    d, m, m_new = flat(d), flat(m), flat(m_new)
    eta_fwd = (1 + a) * m_new - (1 - a) * m + eps * d
    eta_rev = (1 + a) * (-m) - (1 - a) * (-m_new) + eps * d
    noise = scipy.stats.multivariate_normal(np.zeros(4), 4. * a * cov)
    log_ratio += noise.logpdf(eta_rev) - noise.logpdf(eta_fwd)
    k = scipy.stats.multivariate_normal(np.zeros(4), cov)
    kinetic += k.logpdf(m) - k.logpdf(m_new)  # K(r') - K(r)
  np.testing.assert_allclose(kinetic + rho, log_ratio, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("resample", [True, False])
def test_proposal_start_draws_n_0_m_and_half_drifts_by_inverse_mass(
    kind, resample):
  mass, dist = masses(kind)
  theta, r = draws(40), draws(41)
  eps = 0.2
  got_r, got_theta, _ = dynamics.proposal_start(
      const(theta), const(r), eps, 1., resample, SEED, dist)
  if resample:
    momentum_seed, _ = dynamics.derive_seeds(SEED, 2)
    r = [x.numpy() for x in hamiltonian.sample_momentum(dist, const(r),
                                                        momentum_seed)]
  check(got_r, r, tf.float64)
  check(got_theta, [x + 0.5 * eps * v for x, v in
                    zip(theta, inverse_times(mass, r))], tf.float64)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("t,num_steps", [(0, 3), (2, 3)])
def test_leapfrog_step_with_a_mass_matrix(kind, t, num_steps):
  # r' = ((1 - a) r - eps g + sqrt(4 a) z) / (1 + a), z ~ N(0, M);
  # rho += eps g^T M^{-1} (r + r') / 2; theta += eps M^{-1} r' (half at
  # the last step).
  mass, dist = masses(kind)
  theta, r, g = draws(50), draws(51), draws(52, 3.)
  eps, beta = 0.15, 0.6
  a = eps * beta
  noise_seed = tf.constant([7, 8])
  got_theta, got_r, got_rho = dynamics.leapfrog_step(
      tf.constant(t), const(theta), const(r), tf.constant([0.5, 1., -2.],
                                                          tf.float64),
      const(g), eps, beta, 1., num_steps, noise_seed, batch_ndims=1,
      momentum_distribution=dist)
  z = [x.numpy() for x in hamiltonian.sample_momentum(dist, const(r),
                                                      noise_seed)]
  new_r = [((1 - a) * m - eps * d + np.sqrt(4 * a) * x) / (1 + a)
           for m, d, x in zip(r, g, z)]
  both = inverse_times(mass, [m + n for m, n in zip(r, new_r)])
  rho = np.array([0.5, 1., -2.]) + per_chain_sum(
      [0.5 * eps * d * w for d, w in zip(g, both)])
  scale = eps * (0.5 if t == num_steps - 1 else 1.)
  check(got_r, new_r, tf.float64)
  check(got_theta, [x + scale * v for x, v in
                    zip(theta, inverse_times(mass, new_r))], tf.float64)
  np.testing.assert_allclose(got_rho, rho, **TOL[tf.float64])


def test_amagold_parameters_refuse_momentum_std_with_a_mass_matrix():
  _, dist = masses("diagonal")
  dynamics.amagold.check_amagold_parameters(3, 0.5, 1., True, dist)
  with pytest.raises(ValueError, match=r"`momentum_std` = 2.0 with a "
                     "`momentum_distribution`.*Leave momentum_std at 1"):
    dynamics.amagold.check_amagold_parameters(3, 0.5, 2., True, dist)


def test_diagonal_momentum_distribution_is_n_0_inverse_of_inverse_mass():
  state = [tf.zeros([2, 3]), tf.zeros([2])]
  dist = hamiltonian.diagonal_momentum_distribution(
      state, batch_ndims=1, inverse_mass=[tf.constant([1., 4., 0.01]), 2.])
  r = [tf.constant([[1., 2., 3.], [-1., 0.5, 2.]]), tf.constant([0.3, -1.])]
  v = hamiltonian.velocity(r, dist)
  np.testing.assert_allclose(v[0], r[0] * [1., 4., 0.01], rtol=1e-6)
  np.testing.assert_allclose(v[1], r[1] * 2., rtol=1e-6)
  assert [x.shape for x in hamiltonian.sample_momentum(dist, state, SEED)] \
      == [(2, 3), (2,)]



def test_a_per_part_inverse_mass_for_a_dict_out_of_key_order_is_refused():
  # tf.nest reads {"w", "b"} as [b, w]: inverse_mass=[100., 0.01] written
  # in the dict's order gave w M^{-1} = 0.01 and b 100, silently. A dict
  # of values is read by key, and a dict in key order takes the list.
  state = {"w": tf.zeros([2, 3]), "b": tf.zeros([2, 3])}
  with pytest.raises(ValueError, match=r"sorts a dict's keys.*'w', 'b'"):
    hamiltonian.diagonal_momentum_distribution(state, 1, [100., 0.01])
  r = {"w": tf.ones([2, 3]), "b": tf.ones([2, 3])}
  by_key = hamiltonian.diagonal_momentum_distribution(
      state, 1, {"w": 100., "b": 0.01})
  in_order = hamiltonian.diagonal_momentum_distribution(
      {"b": state["b"], "w": state["w"]}, 1, [0.01, 100.])
  for dist in (by_key, in_order):
    v = hamiltonian.velocity(r, dist)
    np.testing.assert_allclose(v["w"], 100., rtol=1e-6)
    np.testing.assert_allclose(v["b"], 0.01, rtol=1e-6)

def test_the_diagonal_form_is_read_without_a_gradient_and_agrees_with_it():
  # diagonal_momentum_distribution's (and DiagonalMassMatrixAdaptation's)
  # form is a DiagonalMass, M^{-1} read directly; any other distribution is
  # differentiated. Both give M^{-1} r for the same M.
  as_mass = dynamics.mass.as_mass
  mass, dist = masses("diagonal")
  assert isinstance(as_mass(dist), dynamics.mass.DiagonalMass)
  generic = hamiltonian.batch_momentum_distribution(
      tfd.JointDistributionSequential([
          tfd.MultivariateNormalDiag(
              scale_diag=tf.constant(np.sqrt(1. / DIAGONAL[0]))),
          tfb.Reshape([2, 2])(tfd.MultivariateNormalDiag(
              scale_diag=tf.constant(np.sqrt(1. / DIAGONAL[1].reshape(-1)))))
      ]), [CHAINS])
  assert isinstance(as_mass(generic), dynamics.mass.DistributionMass)
  r = draws(60, 2.)
  check(hamiltonian.velocity(const(r), generic), inverse_times(mass, r),
        tf.float64)
  check(hamiltonian.velocity(const(r), dist), inverse_times(mass, r),
        tf.float64)


def test_a_step_with_a_dense_mass_solves_no_triangular_system():
  # A draw L^{-T} z as a triangular solve runs as a loop in XLA on a CPU,
  # in every leapfrog step (benchmarks/dense_mass_step.py). The form holds
  # L^{-1}, so a step's draws are products.
  import tfp_sgmcmc  # pylint: disable=import-outside-toplevel
  target = tfp_sgmcmc.LogProbFnTarget(lambda w: -0.5 * tf.reduce_sum(
      w * w, -1))
  kernel = tfp_sgmcmc.AMAGOLD(
      target, step_size=0.1, num_leapfrog_steps=3, friction=0.1,
      momentum_distribution=dynamics.mass.dense_momentum_distribution(
          tf.constant(DENSE[0], tf.float32)))
  state = tf.zeros([CHAINS, 4])
  results = kernel.bootstrap_results(state)
  graph_def = tf.function(
      lambda s, r: kernel.one_step(s, r, seed=SEED),
      autograph=False).get_concrete_function(
          state, results).graph.as_graph_def()
  ops = [n.op for n in graph_def.node] + [
      n.op for f in graph_def.library.function for n in f.node_def]
  assert "MatMul" in ops or "BatchMatMulV2" in ops, sorted(set(ops))
  assert "MatrixTriangularSolve" not in ops


def test_the_low_rank_form_is_read_without_a_gradient_and_agrees_with_it():
  # low_rank_momentum_distribution's form is a LowRankMass (O(d k)
  # formulas); the same distribution differentiated as any Gaussian gives
  # the same M^{-1} r, and both equal the dense M^{-1} r.
  mass, dist = masses("low_rank")
  assert isinstance(dynamics.mass.as_mass(dist), dynamics.mass.LowRankMass)
  r = draws(61, 2.)
  generic = dynamics.mass.DistributionMass(dist).velocity(const(r))
  check(generic, inverse_times(mass, r), tf.float64)
  check(hamiltonian.velocity(const(r), dist), inverse_times(mass, r),
        tf.float64)


def test_the_dense_form_is_read_and_draws_n_0_m_from_the_engines_normals():
  # dense_momentum_distribution(C) is N(0, M) with M^{-1} = C = L L^T: read
  # as a DenseMass, a draw is L^{-T} z from the engine's z (covariance
  # (L L^T)^{-1} = M) and the velocity C r equals the distribution's own
  # gradient of -log N(r; 0, M).
  c = DENSE[0]
  dist = hamiltonian.batch_momentum_distribution(
      dynamics.mass.dense_momentum_distribution(tf.constant(c)), [CHAINS])
  mass = dynamics.mass.as_mass(dist)
  assert isinstance(mass, dynamics.mass.DenseMass)
  like = tf.zeros([CHAINS, 4], tf.float64)
  z = dynamics.standard_normal_like(like, SEED).numpy()
  expected = np.linalg.solve(np.linalg.cholesky(c).T, z.T).T
  np.testing.assert_allclose(mass.sample(like, SEED), expected, rtol=1e-10)
  r = const(draws(3, 2.))[0]
  np.testing.assert_allclose(
      mass.velocity(r), dynamics.mass.DistributionMass(dist).velocity(r),
      rtol=1e-10)
  np.testing.assert_allclose(mass.velocity(r), r.numpy() @ c.T, rtol=1e-10)
