/*
 * ctf-operator - per-team CTF challenge instances on Kubernetes.
 *
 * A ChallengeDefinition says what an instance is made of; a Challenge asks
 * for one team's instance. This program reads the flags and wires the
 * layers (README.md): it runs the Challenge and pool controllers
 * (controller/) on a libkop manager, and serves the instance API and the
 * participant page (api/, web/), and, with --webhook-bind, the validating
 * webhook for Challenges (controller/webhook.c). See docs/ctf-resources.md
 * and docs/api.md.
 */
#include <errno.h>
#include <limits.h>

#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"
#include "controller/operator.h"
#include "controller/probe.h"

static const char usage_text[] =
    "usage: ctf-operator [flags]\n"
    "  --namespace NS               watch Challenges in NS only (default: all)\n"
    "  --max-instances-per-team N   instances one team may run at once (default 3)\n"
    "  --max-instances N            instances in all (default 1000)\n"
    "  --workers N                  Challenges reconciled at once, 1 to 64 (default 16): a\n"
    "                               pass mostly waits on the apiserver, so more workers\n"
    "                               serve a burst of claims sooner\n"
    "  --ingress-domain DOMAIN      HTTP exposures get <expose>-<namespace>.DOMAIN (default: "
    "NodePort)\n"
    "  --node-address HOST          host shown in NodePort endpoints (default 127.0.0.1)\n"
    "  --gateway-domain DOMAIN      the gateway mode: every exposure is reached through a\n"
    "                               Gateway API gateway at <id>.DOMAIN (TLS, by SNI or Host),\n"
    "                               no NodePort (default: off; not with --ingress-domain)\n"
    "  --gateway NS/NAME            the Gateway the routes attach to (default kopc-gateway/ctf)\n"
    "  --gateway-tls-listener NAME  its TLS Terminate listener, for TCP (default tls)\n"
    "  --gateway-https-listener NAME its HTTPS listener, for HTTP (default https)\n"
    "  --gateway-port N             the port participants connect to (default 443)\n"
    "  --gateway-connect-address HOST the address participants connect to when <id>.DOMAIN\n"
    "                               does not resolve to the gateway (e.g. 127.0.0.1 for a\n"
    "                               demo): TCP commands dial HOST with <id>.DOMAIN as SNI\n"
    "  --gateway-pod-namespace NS   where the gateway's pods run: the only source the\n"
    "                               exposed ports admit (default: the Gateway's namespace)\n"
    "  --gateway-pod-selector K=V,.. those pods' labels (default: every pod of that namespace)\n"
    "  --gateway-probe-address HOST:PORT where the operator reaches the gateway to check, TLS\n"
    "                               with each host's SNI, that an instance is served before it\n"
    "                               is Running (default: none; Running waits for Accepted)\n"
    "  --gateway-probe-ca FILE      PEM file of the CA (or the self-signed certificate) the\n"
    "                               probe verifies the gateway's certificate against, for\n"
    "                               each host's name; an instance whose certificate fails\n"
    "                               waits with GatewayCertificateInvalid (default: the\n"
    "                               system's CA store)\n"
    "  --gateway-key-secret NAME    the Secret (system namespace) of the host key, made when\n"
    "                               absent (default ctf-gateway-host-key)\n"
    "  --system-namespace NS        where the Lease and the API's token Secrets live\n"
    "                               (default kopc-system)\n"
    "  --api-bind ADDR              the instance API and page (default 127.0.0.1:8080; 0: off)\n"
    "  --challenge-namespace NS     where the API reads definitions and creates Challenges\n"
    "                               (default ctf)\n"
    "  --api-team-burst N           writes a team may make at once (default 20)\n"
    "  --api-team-rate N            writes per minute a team gets back (default 20)\n"
    "  --api-heartbeat SECONDS      event stream heartbeat interval, 1 to 30 (default 15)\n"
    "  --api-per-address N          connections one client address may hold (default 64;\n"
    "                               0: no cap, for an API behind a reverse proxy)\n"
    "  --api-max-streams N          event streams in all, shared fairly (default 2048)\n"
    "  --install-crds               apply the operator's CRDs at start-up (needs the\n"
    "                               crd_installer_role RBAC)\n"
    "  --migrate-storage            rewrite every ChallengeDefinition and Challenge at\n"
    "                               its CRD's storage version, drop the others from\n"
    "                               status.storedVersions, and exit (a Job's command)\n";

/* parse_int reads a positive int flag value. */
static bool parse_int(const char *v, int *out)
{
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || *end || n < 1 || n > INT_MAX)
        return false;
    *out = (int)n;
    return true;
}

/* parse_gateway splits "NS/NAME" into g's namespace and name, in place in v. */
static bool parse_gateway(char *v, ctf_gateway *g)
{
    char *slash = strchr(v, '/');
    if (!slash || slash == v || !slash[1] || strchr(slash + 1, '/'))
        return false;
    *slash = '\0';
    g->namespace = v;
    g->name = slash + 1;
    return true;
}

/* parse_port reads a TCP port. */
static bool parse_port(const char *v, int *out)
{
    return parse_int(v, out) && *out <= 65535;
}

/* parse_args fills the manager's and the operator's settings. It returns 0
 * to run, 1 after -h or --help printed the usage on stdout (exit 0, as
 * kop_main does), -1 for a wrong command line. */
static int parse_args(int argc, char **argv, kop_manager_opts *mo, ctf_operator *op,
                      ctf_api_opts *ao, const char **key_secret)
{
    ctf_gateway *g = &op->instance.gateway;
    kop_status st;
    for (int i = 1; i < argc;) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            printf("%s%s", usage_text, kop_manager_flags_usage());
            return 1;
        }
        int r = kop_manager_parse_flag(mo, argc, argv, &i, &st);
        if (r < 0) {
            fprintf(stderr, "ctf-operator: %s\n", st.message);
            return -1;
        }
        if (r > 0)
            continue;
        const char *flag = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(flag, "--install-crds") == 0) {
            op->install_crds = true;
            i++;
            continue;
        }
        if (strcmp(flag, "--migrate-storage") == 0) {
            op->migrate_storage = true;
            i++;
            continue;
        }
        bool ok = v != NULL;
        if (ok && strcmp(flag, "--namespace") == 0)
            op->watch_namespace = v;
        else if (ok && strcmp(flag, "--max-instances-per-team") == 0)
            ok = parse_int(v, &op->max_per_team);
        else if (ok && strcmp(flag, "--max-instances") == 0)
            ok = parse_int(v, &op->max_instances);
        else if (ok && strcmp(flag, "--workers") == 0)
            ok = parse_int(v, &op->workers) && op->workers <= KOP_MAX_CONCURRENT;
        else if (ok && strcmp(flag, "--ingress-domain") == 0)
            op->instance.ingress_domain = v;
        else if (ok && strcmp(flag, "--node-address") == 0)
            op->instance.node_address = v;
        else if (ok && strcmp(flag, "--gateway-domain") == 0)
            g->domain = v;
        else if (ok && strcmp(flag, "--gateway") == 0)
            ok = parse_gateway(argv[i + 1], g);
        else if (ok && strcmp(flag, "--gateway-tls-listener") == 0)
            g->tls_listener = v;
        else if (ok && strcmp(flag, "--gateway-https-listener") == 0)
            g->https_listener = v;
        else if (ok && strcmp(flag, "--gateway-port") == 0)
            ok = parse_port(v, &g->port);
        else if (ok && strcmp(flag, "--gateway-connect-address") == 0)
            g->connect_address = v;
        else if (ok && strcmp(flag, "--gateway-pod-namespace") == 0)
            g->pod_namespace = v;
        else if (ok && strcmp(flag, "--gateway-pod-selector") == 0)
            g->pod_selector = v;
        else if (ok && strcmp(flag, "--gateway-probe-address") == 0)
            g->probe_address = v;
        else if (ok && strcmp(flag, "--gateway-probe-ca") == 0)
            ok = ctf_nonempty(g->probe_ca = v);
        else if (ok && strcmp(flag, "--gateway-key-secret") == 0)
            ok = kop_meta_is_valid_dns1123_subdomain(*key_secret = v);
        else if (ok && strcmp(flag, "--system-namespace") == 0)
            mo->leader_election_namespace = ao->system_namespace = v;
        else if (ok && strcmp(flag, "--api-bind") == 0)
            ao->bind = v;
        else if (ok && strcmp(flag, "--challenge-namespace") == 0)
            ok = kop_meta_is_valid_dns1123_label(ao->challenge_namespace = v);
        else if (ok && strcmp(flag, "--api-team-burst") == 0)
            ok = parse_int(v, &ao->team_burst);
        else if (ok && strcmp(flag, "--api-team-rate") == 0)
            ok = parse_int(v, &ao->team_per_minute);
        else if (ok && strcmp(flag, "--api-heartbeat") == 0)
            ok = parse_int(v, &ao->heartbeat_s) && ao->heartbeat_s <= 30;
        else if (ok && strcmp(flag, "--api-max-streams") == 0)
            ok = parse_int(v, &ao->max_streams) && ao->max_streams <= 65536;
        else if (ok && strcmp(flag, "--api-per-address") == 0)
            ok = strcmp(v, "0") == 0 ? (ao->per_address = 0, true) : parse_int(v, &ao->per_address);
        else {
            fprintf(stderr, "ctf-operator: bad flag %s\n%s%s", flag, usage_text,
                    kop_manager_flags_usage());
            return -1;
        }
        if (!ok) {
            fprintf(stderr, "ctf-operator: %s: bad value \"%s\"\n", flag, v ? v : "");
            return -1;
        }
        i += 2;
    }
    if (ctf_nonempty(g->domain) && ctf_nonempty(op->instance.ingress_domain)) {
        fprintf(stderr, "ctf-operator: --gateway-domain and --ingress-domain exclude each other: "
                        "the gateway serves HTTP exposures too\n");
        return -1;
    }
    return 0;
}

/* The gateway's host key to load: the step kop_manager_retry runs. */
struct key_step {
    kop_client *c;
    const char *ns, *secret;
    unsigned char **key;
    size_t *len;
};

static kop_err load_key(void *user, kop_status *st)
{
    struct key_step *k = user;
    return ctf_gateway_key_load(k->c, k->ns, k->secret, k->key, k->len, st);
}

/*
 * setup_gateway: in the gateway mode, the host key is read (made when
 * absent, controller/gateway.c) into *key (owned) and the settings checked.
 */
static kop_err setup_gateway(ctf_operator *op, const char *system_ns, const char *secret,
                             unsigned char **key, size_t *key_len, kop_status *st)
{
    ctf_gateway *g = &op->instance.gateway;
    if (!ctf_gateway_on(&op->instance))
        return KOP_OK;
    ctf_gateway_defaults(g);
    if (ctf_nonempty(g->probe_ca) && !ctf_nonempty(g->probe_address)) {
        kop_status_setf(st, 0, NULL,
                        "--gateway-probe-ca needs --gateway-probe-address: the CA is what the "
                        "probe verifies the gateway's certificate against");
        return KOP_ECONFIG;
    }
    if (ctf_nonempty(g->probe_ca)) {
        kop_err err = ctf_probe_ca_check(g->probe_ca, st);
        if (err)
            return err;
    }
    if (!ctf_nonempty(g->probe_address))
        kop_log(KOP_LOG_WARN,
                "gateway mode without --gateway-probe-address: Running means the gateway "
                "accepted the routes, and it may serve them a few seconds later",
                KOP_LOG_STR("gateway_domain", g->domain));
    struct key_step k = {kop_manager_client(op->mgr), system_ns, secret, key, key_len};
    kop_err err = kop_manager_retry(op->mgr, "loading the gateway's host key", load_key, &k, st);
    if (err)
        return err;
    g->key = *key;
    g->key_len = *key_len;
    return ctf_gateway_check(&op->instance, st);
}

int main(int argc, char **argv)
{
    ctf_operator op = {
        .instance = {.node_address = "127.0.0.1"},
        .max_per_team = 3,
        .max_instances = 1000,
        .workers = CTF_WORKERS_DEFAULT,
    };
    kop_manager_opts mo = {
        .name = "kopc-ctf-operator",
        .leader_election_namespace = "kopc-system",
    };
    ctf_api_opts ao = {
        .bind = "127.0.0.1:8080",
        .challenge_namespace = "ctf",
        .system_namespace = "kopc-system",
        .team_burst = 20,
        .team_per_minute = 20,
        .heartbeat_s = 15,
        .per_address = 64,
        .max_streams = 2048,
    };
    ctf_api *api = NULL;
    const char *key_secret = CTF_GATEWAY_KEY_SECRET;
    unsigned char *gateway_key = NULL;
    size_t gateway_key_len = 0;
    kop_status st;
    kop_err err;

    kop_status_clear(&st);
    int parsed = parse_args(argc, argv, &mo, &op, &ao, &key_secret);
    if (parsed)
        return parsed > 0 ? 0 : 2;
    err = kop_manager_new(&mo, &op.mgr, &st);
    if (!err && op.migrate_storage) {
        err = ctf_migrate_storage(kop_manager_client(op.mgr), &st);
        if (err)
            fprintf(stderr, "ctf-operator: %s: %s\n", kop_strerror(err), st.message);
        kop_manager_free(op.mgr);
        return err ? 1 : 0;
    }
    if (!err)
        err = setup_gateway(&op, ao.system_namespace, key_secret, &gateway_key, &gateway_key_len,
                            &st);
    if (!err && op.install_crds)
        err = ctf_install_crds(op.mgr, &st);
    if (!err)
        err = ctf_choose_versions(op.mgr, &st);
    if (!err)
        err = kop_recorder_new(kop_manager_client(op.mgr), "kopc-ctf", NULL, &op.events);
    if (!err)
        err = ctf_setup_controller(&op, &st);
    if (!err)
        err = ctf_setup_pool(&op, &st);
    if (!err)
        err = ctf_setup_webhook(&op, &st);
    if (!err)
        err = ctf_api_new(&op, &ao, &api, &st);
    if (!err)
        err = ctf_api_start(api, &st);
    if (!err) {
        kop_log(KOP_LOG_INFO, "ctf-operator starting",
                KOP_LOG_STR("namespace", op.watch_namespace ? op.watch_namespace : "(all)"),
                KOP_LOG_INT("max_per_team", op.max_per_team),
                KOP_LOG_INT("max_instances", op.max_instances), KOP_LOG_INT("workers", op.workers),
                KOP_LOG_STR("ingress_domain", op.instance.ingress_domain),
                KOP_LOG_STR("gateway_domain", op.instance.gateway.domain),
                KOP_LOG_STR("gateway", op.instance.gateway.name));
        err = kop_manager_run(op.mgr, &st);
    }
    if (err == KOP_ECANCELED) /* SIGTERM before the start was through: a clean stop */
        err = KOP_OK;
    if (err)
        fprintf(stderr, "ctf-operator: %s: %s\n", kop_strerror(err), st.message);
    if (err == KOP_ETIMEOUT)
        return 1; /* reconciles still run: free nothing they may use */
    ctf_api_free(api);
    kop_recorder_free(op.events);
    kop_manager_free(op.mgr);
    ctf_admission_free(op.admission);
    ctf_applied_free(op.applied);
    ctf_written_free(op.written);
    ctf_census_free(op.census);
    ctf_rollout_free(op.rollout);
    ctf_fresh_free(op.fresh);
    ctf_pool_free(op.pool);
    if (gateway_key) {
        OPENSSL_cleanse(gateway_key, gateway_key_len);
        free(gateway_key);
    }
    ctf_webhook_free(op.webhook);
    return err ? 1 : 0;
}
