"""`chains.arrival.check_arrival`: a warm-up still on its way is told from
the gradient where the chains stand; chains at the posterior are not."""

import numpy as np
import pytest

from tfp_sgmcmc.chains import arrival


def _gaussian(dim, correlation, seed):
  """A posterior N(m, S) with equicorrelated S (unit variances)."""
  rng = np.random.default_rng(seed)
  cov = np.full((dim, dim), correlation) + (1. - correlation) * np.eye(dim)
  return rng, rng.normal(size=dim), cov, np.linalg.inv(cov)


def _gradients(theta, mean, precision):
  return (theta - mean) @ precision   # grad U of N(mean, cov)


@pytest.mark.parametrize("correlation", [0., 0.8])
def test_chains_at_the_posterior_are_not_flagged(correlation):
  # 2,000 warm-ups ending at exact draws of the posterior (4 chains, 20
  # coordinates, up to a variance inflation of 4.3): no false alarm.
  rng, mean, cov, precision = _gaussian(20, correlation, 0)
  chol = np.linalg.cholesky(cov)
  alarms = 0
  for _ in range(2000):
    theta = mean + rng.normal(size=(4, 20)) @ chol.T
    result = arrival.check_arrival([_gradients(theta, mean, precision)],
                                   [np.diag(cov)], 4)
    alarms += not result.arrived
  assert alarms == 0


@pytest.mark.parametrize("distance", [30., 70.])
def test_chains_on_the_slope_are_flagged(distance):
  # Chains bunched within 1 sd of each other, `distance` sds from the mode
  # along a random direction, with a variance estimate 10x off either way.
  rng, mean, cov, precision = _gaussian(20, 0.8, 1)
  direction = rng.normal(size=20)
  direction /= np.linalg.norm(direction)
  theta = mean + distance * direction + 0.5 * rng.normal(size=(4, 20))
  variance = np.diag(cov) * np.exp(rng.uniform(-2.3, 2.3, size=20))
  result = arrival.check_arrival([_gradients(theta, mean, precision)],
                                 [variance], 4)
  assert not result.arrived
  assert result.distance > arrival.MAX_DISTANCE
  assert "find_mode" in result.cause and "ControlVariateTarget" in result.cause


def test_one_chain_uses_the_distance_alone():
  g = np.array([[100., 0.3]])
  result = arrival.check_arrival(g, np.ones(2), 1)
  assert not result.arrived and result.agreement is None
  assert list(result.coordinates) == [0]
  assert arrival.check_arrival(np.array([[1., -0.5]]), np.ones(2), 1).arrived


def test_chains_that_disagree_on_the_slope_are_not_flagged():
  # Large gradients of both signs: chains spread across the posterior (or in
  # different modes), not a warm-up on its way.
  g = np.array([[50.], [-60.], [55.], [-48.]])
  assert arrival.check_arrival(g, [np.ones(1)], 4).arrived



def test_one_stranded_chain_is_flagged():
  # Three chains at the posterior and one far from it (as a chain started
  # at a tiny noise scale, where the step size tuned for the others does
  # not move it): the chains' mean gradient is a quarter of the stranded
  # one's and its t statistic exactly 1, so neither test sees it.
  rng, mean, cov, precision = _gaussian(20, 0.8, 2)
  theta = mean + rng.normal(size=(4, 20)) @ np.linalg.cholesky(cov).T
  direction = rng.normal(size=20)
  theta[2] += 5e4 * direction / np.linalg.norm(direction)
  result = arrival.check_arrival([_gradients(theta, mean, precision)],
                                 [np.diag(cov)], 4)
  assert not result.arrived
  assert result.distance > arrival.MAX_CHAIN_DISTANCE
  assert "chain 2 (of 4," in result.cause and "stranded" in result.cause
  # A coordinate whose variance inflation is 1e6 (marginal sd 1,000 times
  # the conditional one), at the posterior: not flagged.
  g = rng.normal(size=(4, 1)) * 1e3
  assert arrival.check_arrival(g, [np.ones(1)], 4).arrived

def test_a_stranded_chain_is_flagged_against_the_other_chains():
  # One coordinate of posterior sd s (the mean of N = 5,000 unit-noise
  # examples), three chains at the posterior and one 72 sds away, and the
  # warm-up's variance pooled over all four chains, so 31 times s: the
  # stranded chain's own distance in that inflated sd (about 2,300) is
  # under MAX_CHAIN_DISTANCE and the chains' t statistic is about 1, but
  # its gradient is 67 times the root mean square of the others'.
  s = 1. / np.sqrt(5000.)
  theta = np.array([[0.5 * s], [-1. * s], [72. * s], [1.5 * s]])
  pooled = np.var(theta)
  result = arrival.check_arrival([theta / s**2], [np.array([pooled])], 4)
  assert not result.arrived
  assert "chain 2 (of 4," in result.cause and "stranded" in result.cause
  assert result.distance < arrival.MAX_CHAIN_DISTANCE
  # The same chain 10 sds away: it moves under the others' step size.
  theta[2] = 10. * s
  assert arrival.check_arrival([theta / s**2], [np.array([np.var(theta)])],
                               4).arrived


@pytest.mark.parametrize("chains,coordinates", [(4, 1), (4, 20), (8, 5)])
def test_the_stranded_chain_rule_keeps_its_false_alarm_rate(chains,
                                                          coordinates):
  # At the posterior each chain's gradient over the others' root mean square
  # is |t| with C - 1 degrees of freedom; the rule's threshold is passed by
  # chance, somewhere among the C x D ratios, with probability at most
  # STRANDED_FALSE_ALARM (1e-3): 20,000 simulated warm-ups, so at most 20
  # expected; 35 is 3.4 sds of a Poisson(20) above that.
  # pylint: disable=protected-access
  rng = np.random.default_rng(11)
  limit = arrival._stranded_ratio(chains, coordinates)
  ratios = arrival._ratio_to_others
  alarms = sum(bool((ratios(rng.normal(size=(chains, coordinates))) > limit)
                    .any()) for _ in range(20000))
  assert alarms <= 35


def test_a_chain_whose_energy_stands_far_above_the_others_is_stranded():
  # The random-intercepts case (201 coordinates): chains at the posterior
  # in their gradients, as far as the gradient rules can tell, but one
  # chain's exact energy 14,000 nats above the others'.
  rng, mean, cov, precision = _gaussian(201, 0., 3)
  theta = mean + rng.normal(size=(4, 201))
  grads = [_gradients(theta, mean, precision)]
  energies = np.array([77_249., 63_079., 63_069., 63_090.])
  assert arrival.check_arrival(grads, [np.diag(cov)], 4).arrived
  result = arrival.check_arrival(grads, [np.diag(cov)], 4,
                                 energies=energies)
  assert not result.arrived
  assert "chain 0 (of 4," in result.cause and "nats above" in result.cause
  # A gap the posterior's own spread of U explains is not flagged.
  energies[0] = 63_069. + 3. * np.sqrt(201 / 2.)
  assert arrival.check_arrival(grads, [np.diag(cov)], 4,
                               energies=energies).arrived


@pytest.mark.parametrize("dim", [1, 20, 201])
def test_the_energy_gap_rule_passes_chains_at_the_posterior(dim):
  # At a Gaussian posterior U - U_min is Gamma(d / 2, 1): 2,000 warm-ups
  # of 4 chains at exact draws, energies and gradients alike, no alarm.
  rng, mean, cov, precision = _gaussian(dim, 0., 5)
  alarms = 0
  for _ in range(2000):
    theta = mean + rng.normal(size=(4, dim))
    energies = 0.5 * np.sum((theta - mean)**2, axis=1)
    alarms += not arrival.check_arrival(
        [_gradients(theta, mean, precision)], [np.diag(cov)], 4,
        energies=energies).arrived
  assert alarms == 0


def test_list_state_and_part_count_check():
  g = [np.full((4, 2), 30.) + np.arange(4)[:, None], np.zeros((4, 3))]
  result = arrival.check_arrival(g, [np.ones(2), np.ones(3)], 4)
  assert not result.arrived and list(result.coordinates) == [0, 1]
  with pytest.raises(ValueError, match="one variance per state part"):
    arrival.check_arrival(g, [np.ones(2)], 4)


def test_warning_names_the_fix():
  flagged = arrival.check_arrival(np.array([[100.]]), np.ones(1), 1)
  with pytest.warns(arrival.WarmupNotConvergedWarning, match="find_mode"):
    arrival.warn_if_not_arrived(flagged)


def test_without_a_variance_the_agreement_alone_decides():
  slope = np.array([[100.], [101.], [99.], [100.5]])
  assert not arrival.check_arrival(slope, None, 4).arrived
  rng = np.random.default_rng(3)
  alarms = sum(not arrival.check_arrival(rng.normal(size=(4, 20)), None,
                                         4).arrived for _ in range(2000))
  assert alarms == 0
  assert arrival.check_arrival(slope[:1], None, 1).arrived


def test_without_a_variance_every_coordinate_of_any_part_counts():
  # The ones standing in for the variance had the shape of a part's last
  # axis: a [chains, 3, 2] part (warm_up(adapt_mass=False) on a matrix
  # state) raised numpy's "operands could not be broadcast together with
  # shapes (6,) (2,)", and a scalar part under chains [2, 3] counted 3
  # coordinates for 1.
  rng = np.random.default_rng(0)
  assert arrival.check_arrival([rng.normal(size=(4, 3, 2))], None,
                               4).arrived
  slope = arrival.check_arrival([100. + rng.normal(size=(4, 3, 2))], None,
                                4)
  assert not slope.arrived and "in 6 of 6 coordinates" in slope.cause
  batched = arrival.check_arrival([100. + rng.normal(size=(2, 3))], None,
                                  6)
  assert not batched.arrived and "in 1 of 1 coordinates" in batched.cause




def test_without_a_variance_parts_of_any_event_rank_are_read():
  # A warm-up without a mass (SGLD, adapt_mass=False) has no variance:
  # a [3, 2] matrix part and a scalar part (4 chains) were read as 2 and
  # 1 coordinates against the gradients' 7 and refused in numpy's words.
  # A slope in the matrix's entry [1, 0] (flat coordinate 2) is found.
  rng = np.random.default_rng(4)
  matrix, scalar = rng.normal(size=(4, 3, 2)), rng.normal(size=4)
  matrix[:, 1, 0] = 100. + rng.normal(size=4)
  result = arrival.check_arrival([matrix, scalar], None, 4)
  assert not result.arrived and list(result.coordinates) == [2]
  matrix[:, 1, 0] = rng.normal(size=4)
  assert arrival.check_arrival([matrix, scalar], None, 4).arrived


def _ridge(num_examples=20_000, prior_sd=1.):
  """The posterior N(0, S) of (a1, a2, c) where the data see a1 + a2 and c
  (N examples each of unit precision) and a N(0, prior_sd^2) prior sees
  each: a1 - a2 is identified by the prior alone."""
  ridge = np.array([1., 1., 0.])
  precision = num_examples * (np.outer(ridge, ridge) + np.diag(
      [0., 0., 1.])) + np.eye(3) / prior_sd**2
  return np.linalg.inv(precision), precision


def test_a_direction_the_data_do_not_identify_is_measured_in_its_own_scale():
  # Chains at exact draws of the posterior. In the diagonal step |g_i| sd_i
  # the marginal sd of a1 (about the prior's, 0.71) multiplies a gradient
  # of the sum's precision (4e4): the chains "arrived (distance 15
  # posterior sds)", at any distance from the posterior. The Newton step
  # S g, in the same sds, is about N(0, 1 / C) per coordinate.
  cov, precision = _ridge()
  rng = np.random.default_rng(0)
  chol = np.linalg.cholesky(cov)
  diagonal, dense = [], []
  for _ in range(500):
    g = (rng.normal(size=(4, 3)) @ chol.T) @ precision
    diagonal.append(arrival.check_arrival([g], [np.diag(cov)], 4).distance)
    result = arrival.check_arrival([g], [np.diag(cov)], 4, covariance=cov)
    assert result.arrived
    dense.append(result.distance)
  assert np.median(diagonal) > 8.   # What the report said.
  # The largest of 3 |N(0, 1/4)|: median 0.6, above 2.5 with probability
  # 1e-6.
  assert np.median(dense) < 1. and np.max(dense) < 2.5, np.max(dense)
  # Chains 30 sds along either direction are still far.
  sd = np.sqrt(np.diag(cov))
  for direction in ([1., -1., 0.], [1., 1., 0.]):
    step = 30. * np.array(direction) * sd / np.sqrt(2.)
    theta = step + 0.1 * rng.normal(size=(4, 3)) @ chol.T
    far = arrival.check_arrival([theta @ precision], [np.diag(cov)], 4,
                                covariance=cov)
    assert not far.arrived and far.distance > 15., far


def test_a_covariance_of_another_size_is_refused():
  with pytest.raises(ValueError, match=r"`covariance` has shape \[2, 2\]"):
    arrival.check_arrival([np.ones((4, 3))], [np.ones(3)], 4,
                          covariance=np.eye(2))
