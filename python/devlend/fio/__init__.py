"""fio job files on the model: ``devlend fio JOBFILE --topology FILE --host HOST --device DEVICE``."""
