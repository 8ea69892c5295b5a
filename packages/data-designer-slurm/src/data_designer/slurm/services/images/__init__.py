"""Container images: ``image add`` (a file, or a ``docker://`` import by a CPU job), ``ls``, ``info``, ``rm``, and
the registered images a plan resolves."""

from data_designer.slurm.services.images._add import add_image
from data_designer.slurm.services.images._info import image_info, list_images
from data_designer.slurm.services.images._records import registered_images, submitting_installation
from data_designer.slurm.services.images._removal import remove_image

__all__ = [
    "add_image",
    "image_info",
    "list_images",
    "registered_images",
    "remove_image",
    "submitting_installation",
]
