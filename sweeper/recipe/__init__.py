"""Stage 3, a recipe for a target: evaluate the laws at the target model (shape inference and law
scale in :mod:`~sweeper.recipe.scale`), size the batch and memory for the hardware
(:mod:`~sweeper.recipe.hardware`, :mod:`~sweeper.recipe.memory`), compare with published laws and
recipes (:mod:`~sweeper.recipe.published`, :mod:`~sweeper.recipe.published_recipes`,
:mod:`~sweeper.recipe.compare`, :mod:`~sweeper.recipe.check`), and write it in a framework's format
(:mod:`~sweeper.recipe.export`). Pure functions; no torch, ray or storage."""
