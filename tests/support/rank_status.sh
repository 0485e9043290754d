#!/bin/sh
# A rank of `composer -n N --command_mode tests/support/rank_status.sh STATUS_DIR python train.py ...`: runs the
# rest of its arguments and writes their exit status to STATUS_DIR/rank<RANK> (the launcher reports one rank's status
# and SIGTERMs the others when one ends first; here every rank's own status is kept). SIGTERM is ignored (and by the
# rank, which inherits it) so that each rank ends on its own; the launcher's SIGKILL after 30 s still ends a hung one.
trap '' TERM
dir=$1
shift
"$@"
status=$?
echo "$status" > "$dir/rank$RANK"
exit "$status"
