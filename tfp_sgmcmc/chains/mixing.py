"""Have the chains mixed? The effective sample size and two R-hats of draws
[num_draws, num_chains, coordinates], in NumPy float64, for `summarize`.

* `effective_sample_size`: per chain, TFP's formula.
* `split_rhat`: TFP's `potential_scale_reduction` of the split chains, a
  ratio of variances (about the square of Stan's and ArviZ's R-hat).
* `rank_diagnostics`, R-hat: ArviZ's `az.rhat(method="rank")` (Vehtari,
  Gelman, Simpson, Carpenter & Buerkner 2021): split R-hat of the draws'
  normal scores, and of the normal scores of their distance from the
  median ("folded"), the larger of the two. The first sees chains that
  disagree on location even where heavy tails hide it from `split_rhat`;
  the second sees chains that agree on location but not on spread (one
  chain confined to a narrower region, e.g. a funnel's neck), which both
  others miss.
* `rank_diagnostics`, ESS: ArviZ's `az.ess(method="bulk")` and
  `az.ess(method="tail")` (the same paper): Stan's multi-chain ESS, whose
  autocorrelations are measured against the variance of all chains
  together, so that chains that disagree add few effective draws (two
  chains in two modes: about 2), of the split chains' normal scores and of
  the indicators of the 5% and 95% quantiles (what a 90% interval rests
  on).
"""

import collections

import numpy as np
import tensorflow as tf
import tensorflow_probability as tfp

__all__ = ["effective_sample_size", "split_rhat", "RankDiagnostics",
           "rank_diagnostics", "rank_rhat_note", "rank_ess_note"]


def effective_sample_size(draws):
  """Per-chain ESS of each coordinate, as TFP's
  `tfp.mcmc.effective_sample_size(draws, filter_beyond_positive_pairs=True)`
  computes it (Geyer's initial positive sequence on the autocorrelations),
  in NumPy float64, with Stan's bound: at most n log10(n) per chain.

  TFP's own computes the autocorrelations by a complex FFT, cast back to
  real with a "casting complex64 to float32" warning logged at each call;
  a real FFT gives the same numbers without it.

  Args:
    draws: [num_draws, ...] array; every axis after the first is a batch
      (chains, coordinates).

  Returns:
    ESS with the shape of `draws` less its first axis.
  """
  x = np.asarray(draws, np.float64)
  n = x.shape[0]
  shape = (n,) + (1,) * (x.ndim - 1)
  auto_cov = _lag_sums(x) / (n - np.arange(n)).reshape(shape)
  with np.errstate(invalid="ignore", divide="ignore"):
    auto_corr = auto_cov / auto_cov[:1]
    weighted = ((n - np.arange(n)) / n).reshape(shape) * auto_corr

    def sum_pairs(a):
      a = a[:n - n % 2]
      return a.reshape((n // 2, 2) + a.shape[1:]).sum(axis=1)
    # Pairwise sums of a reversible chain's autocorrelations are positive:
    # everything from the first negative pair on is noise.
    mask = np.maximum(1. - np.cumsum(sum_pairs(auto_corr) < 0., axis=0), 0.)
    # Stan's bound on tau (Vehtari et al. 2021): noise about 0 where the
    # autocorrelations alternate in sign, it made the ESS +-1e5 or negative.
    return n / np.maximum(-1. + 2. * np.sum(sum_pairs(weighted) * mask,
                                            axis=0), 1. / np.log10(n))


def split_rhat(flat):
  """TFP's split R-hat of each coordinate of finite draws `flat` [num_draws,
  num_chains, coordinates]: chains split in halves from 4 draws on (one
  chain: its halves compared, which catches a drift or a mode left half
  way), whole below; 1 for one chain of fewer than 4 draws and for a
  coordinate that never moved; inf where the variances overflow."""
  num_draws, num_chains = flat.shape[:2]
  rhat = (np.asarray(tfp.mcmc.potential_scale_reduction(
      tf.constant(flat), split_chains=num_draws >= 4))
          if num_chains > 1 or num_draws >= 4 else np.ones(flat.shape[-1]))
  # NaN would cross no threshold: 0 / 0 where no chain moved (they agree;
  # its ESS of 0 says so), else variances past float32 (chains at 1e20).
  return np.where(np.ptp(flat, axis=(0, 1)) == 0., 1.,
                  np.where(np.isnan(rhat), np.inf, rhat))


RankDiagnostics = collections.namedtuple(
    "RankDiagnostics", ["max_rhat", "min_bulk_ess", "min_tail_ess"])


def rank_diagnostics(flat):
  """ArviZ's diagnostics of finite draws `flat` [num_draws, num_chains,
  coordinates], the worst over coordinates; all None below 4 draws:

  * `max_rhat`: `az.rhat(method="rank")` (on ArviZ's scale, about the
    square root of `split_rhat`): the larger of the bulk R-hat (split
    R-hat of the normal scores of the pooled ranks) and the tail R-hat
    (the same of the draws' distances from their median); 1 for a
    coordinate that never moved;
  * `min_bulk_ess`, `min_tail_ess`: `az.ess(method="bulk")` and
    `method="tail"`, the multi-chain ESS (`_ess`) of the split chains'
    normal scores, and the smaller of those of the split chains'
    indicators of draws at or below the 5% and the 95% quantile."""
  if flat.shape[0] < 4:
    return RankDiagnostics(None, None, None)
  flat = np.asarray(flat, np.float64)  # float32 scores keep 7 digits.
  num_draws = flat.shape[0]
  half = num_draws // 2
  def split(x):
    # Each chain's first and last halves as chains (the middle draw of an
    # odd number dropped), as ArviZ splits them.
    return np.concatenate([x[:half], x[num_draws - half:]], axis=1)
  halves = split(flat)
  scores = _normal_scores(halves)
  folded = _normal_scores(np.abs(halves - np.median(halves, axis=(0, 1))))
  rhat = np.where(np.ptp(flat, axis=(0, 1)) == 0., 1.,
                  np.maximum(_rhat(scores), _rhat(folded)))
  pooled = np.sort(flat.reshape(-1, flat.shape[-1]), axis=0)
  size, tail = pooled.shape[0], np.inf
  for p in (0.05, 0.95):
    # R's type 7 quantile, in the arithmetic of scipy's `mquantiles` that
    # ArviZ calls: where it falls on a draw, that draw's indicator is
    # decided by the last bit.
    position = size * p + 1. - p
    k = int(np.floor(np.clip(position, 1, size - 1)))
    gamma = np.clip(position - k, 0., 1.)
    quantile = (1. - gamma) * pooled[k - 1] + gamma * pooled[k]
    tail = np.minimum(tail, _ess(split((flat <= quantile).astype(float))))
  return RankDiagnostics(float(np.max(rhat)), float(np.min(_ess(scores))),
                         float(np.min(tail)))


def _ess(x):
  """Stan's multi-chain ESS of chains x [n, m, k] as ArviZ computes it
  (`arviz.stats.diagnostics._ess`): autocorrelations rho_t = 1 - (W -
  mean autocovariance_t) / var+, summed in pairs up to the first pair that
  is not positive (Geyer's initial positive sequence, and the even lag
  after it where positive), each pair at most the one before (Geyer's
  initial monotone sequence), tau at least 1 / log10(n m); n m where a
  coordinate never moved."""
  n, m, _ = x.shape
  auto_cov = _lag_sums(x) / n
  mean_var = auto_cov[0].mean(axis=0) * n / (n - 1.)
  var_plus = mean_var * (n - 1.) / n + (
      np.var(x.mean(axis=0), axis=0, ddof=1) if m > 1 else 0.)
  with np.errstate(invalid="ignore", divide="ignore"):
    rho = 1. - (mean_var - auto_cov.mean(axis=1)) / var_plus
  rho[0] = 1.
  # The pairs (rho_2j, rho_2j+1), j = 1 .. last, that ArviZ's loop reaches.
  last = max(0, -(-(n - 2) // 2) - 1)
  tau = np.zeros(rho.shape[1:])  # Too short to pair (n <= 4): bounded.
  if last:
    pairs = rho[2:2 * last + 2].reshape((last, 2) + rho.shape[1:]).sum(1)
    stops = pairs <= 0.
    # The pair that ends the sum: the first not positive, else the last.
    stop = np.where(stops.any(axis=0), np.argmax(stops, axis=0) + 1, last)
    first = rho[0] + rho[1]
    monotone = np.minimum.accumulate(
        np.concatenate([first[None], pairs]), axis=0)[1:]
    kept = np.arange(1, last + 1)[:, None] < stop
    # Of the pair that ends the sum, its even lag counts unless the pair
    # is negative and the lag is not positive.
    even = np.take_along_axis(rho[2::2][:last], stop[None] - 1, axis=0)[0]
    ending = np.take_along_axis(pairs, stop[None] - 1, axis=0)[0]
    tau = -1. + 2. * (first + np.sum(np.where(kept, monotone, 0.), axis=0)
                      ) + np.where((ending >= 0.) | (even > 0.), even, 0.)
  ess = n * m / np.maximum(tau, 1. / np.log10(n * m))
  moved = np.ptp(x, axis=(0, 1)) >= np.finfo(float).resolution
  return np.where(moved, ess, n * m)


def _lag_sums(x):
  """sum_t (x_t - mean)(x_t+k - mean) for every lag k < n, along the
  first axis of x, by a real FFT."""
  n = x.shape[0]
  size = 1 << int(np.ceil(np.log2(2 * n)))  # No wrap-around of lags.
  spectrum = np.fft.rfft(x - x.mean(axis=0), n=size, axis=0)
  return np.fft.irfft(spectrum * np.conj(spectrum), n=size, axis=0)[:n]


def _normal_scores(x):
  """Phi^-1((r - 3/8) / (S + 1/4)) for the average ranks r of x [n, m, k]
  among its S = n m draws of each coordinate (Blom's scores)."""
  n, m, k = x.shape
  pooled = x.reshape(n * m, k)
  order = np.argsort(pooled, axis=0, kind="stable")
  ordered = np.take_along_axis(pooled, order, axis=0)
  # Tied draws (a chain that did not move) share their average rank.
  index = np.arange(n * m)[:, None]
  starts = np.ones_like(ordered, bool)
  starts[1:] = ordered[1:] != ordered[:-1]
  ends = np.ones_like(ordered, bool)
  ends[:-1] = starts[1:]
  first = np.maximum.accumulate(np.where(starts, index, 0), axis=0)
  last = np.minimum.accumulate(
      np.where(ends, index, n * m)[::-1], axis=0)[::-1]
  ranks = np.empty_like(pooled)
  np.put_along_axis(ranks, order, (first + last) / 2. + 1., axis=0)
  scores = tf.math.ndtri((ranks - 0.375) / (n * m + 0.25)).numpy()
  return scores.reshape(n, m, k)


def _rhat(x):
  """Stan's R-hat of chains x [n, m, k]: sqrt((B/W + n - 1) / n), B the
  between-chain variance (n times the variance of the chain means), W
  the mean within-chain variance."""
  n = x.shape[0]
  between = n * np.var(x.mean(axis=0), axis=0, ddof=1)
  within = np.mean(np.var(x, axis=0, ddof=1), axis=0)
  with np.errstate(invalid="ignore", divide="ignore"):
    return np.sqrt((between / within + n - 1) / n)


def rank_rhat_note(rank_rhat):
  """" (ArviZ's rank-normalised R-hat)" for a report's R-hat, "" for None."""
  return ("" if rank_rhat is None else
          f" (ArviZ's rank-normalised {rank_rhat:.3f})")


def rank_ess_note(bulk, tail):
  """" (ArviZ's bulk / tail b / t)" for a report's ESS, "" for None."""
  return ("" if bulk is None else
          f" (ArviZ's bulk / tail {bulk:.0f} / {tail:.0f})")
