"""The watcher: a helper per team that reads what ``status`` reads each round, turns changes into
events (``.state/<team>/events.jsonl``), tells the owner (the team file's ``notify``) and feeds
``fabrikito watch``, the live view.  It types nothing into any seat and answers no dialog.

* :mod:`~fabrikito.watch.observe`: one round's reading of the team;
* :mod:`~fabrikito.watch.conditions`: a reading, as the set of open conditions;
* :mod:`~fabrikito.watch.tracker`: open conditions from round to round, as opened/resolved events;
* :mod:`~fabrikito.log.events`: the events file, written and read (the one module that does);
* :mod:`~fabrikito.watch.notify`: the owner's command, run off the round;
* :mod:`~fabrikito.watch.watcher`: the loop, its state file and its extension seat;
* :mod:`~fabrikito.watch.view`: ``fabrikito watch``.
"""
