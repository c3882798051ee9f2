"""Reference implementations of the four classic places where a gradient must be cut.

Each module has exactly one named ``stop_gradient`` boundary:

- ``softmax``: ``"softmax.max"``
- ``em``: ``"em.responsibilities"``
- ``rbm``: ``"rbm.negative_samples"``
- ``adversarial``: ``"adversarial.examples"``
"""
