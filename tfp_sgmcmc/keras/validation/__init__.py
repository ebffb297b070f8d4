"""What `SamplingCallback` refuses or warns about, each with an error that
names the fix: the model and its loss (`model`), what `fit` is given
(`fit_arguments`, `fit_checks`) and the misuses seen while it runs
(`traps`)."""
