"""JointDistributionTarget refuses ambiguous data: a pinned model with
`observed=` as well, a model function returning a pinned model, and neither
pins nor `observed`; each error names the fix."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_probability as tfp

import tfp_sgmcmc as sg

tfd = tfp.distributions
Y = np.array([0.5, -0.2, 1.1], np.float32)


def model():
  return tfd.JointDistributionNamed(dict(
      mu=tfd.Normal(0., 1.),
      y=lambda mu: tfd.Normal(mu[..., None] * tf.ones(3), 1.)))


@pytest.mark.parametrize("observed,clash", [({"y": Y}, r"both pin \['y'\]"),
                                            ({"mu": Y[:1]}, r"nodes \['mu'\]"),
                                            ({}, r"nodes \[\]")])
def test_a_pinned_model_with_observed_is_refused(observed, clash):
  with pytest.raises(ValueError, match=r"already pinned \(nodes \['y'\]\)"
                     r"[^$]*" + clash + r"[^$]*Drop `observed=`"):
    sg.JointDistributionTarget(model().experimental_pin(y=Y),
                               observed=observed)


def test_a_model_function_returning_a_pinned_model_is_refused():
  with pytest.raises(TypeError, match="returned a pinned JointDistribution"
                     ".*observed=\\{name: data\\}"):
    sg.JointDistributionTarget(lambda x: model().experimental_pin(y=Y),
                               covariates=np.zeros([3, 1], np.float32),
                               observed={"y": Y})


def test_no_data_at_all_names_both_ways_to_give_it():
  with pytest.raises(TypeError, match=r"got None.*experimental_pin"):
    sg.JointDistributionTarget(model())
