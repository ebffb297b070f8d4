"""The posterior a `SamplingCallback` keeps: the samples and their
predictions (`posterior`), scores of predicted probabilities
(`evaluation`), the files they are saved in (`io`) and the inputs they
predict on (`inputs`)."""
