"""The instance API's end-to-end scenarios, one module per route group; run
in order by test/e2e/ctf_api_test.py (which lists them), on the cluster and
operator that test/e2e/ctf_api_test.sh started."""
