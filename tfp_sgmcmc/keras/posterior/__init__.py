"""The posterior a `SamplingCallback` keeps: the samples and their
predictions (`posterior`), scores of predicted probabilities
(`evaluation`) and the files they are saved in (`io`)."""
