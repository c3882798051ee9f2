"""What runs leave behind: the schema of every results file (:mod:`.schema`), findings and
verdicts (:mod:`.findings`), files read as hostile input (:mod:`.files`), runs read back and
checked (:mod:`.view`), the records runs write (:mod:`.records`). Nothing here imports torch."""
