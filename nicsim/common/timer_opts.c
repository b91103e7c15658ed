/* The connection-timer options (timer_opts.h). */
#include "timer_opts.h"

const struct nic_timer_opt_spec nic_timer_opts[NIC_TIMER_OPTS] = {
    [NIC_TOPT_ACK_TIMEOUT] = {"ack-timeout", 1, 31,
			      "a timeout code (not 0, which would turn the timer off)"},
    [NIC_TOPT_RETRY_COUNT] = {"retry-count", 0, 7, "a retry count"},
    [NIC_TOPT_RNR_RETRY] = {"rnr-retry", 0, 7, "an RNR retry count (7: forever)"},
    [NIC_TOPT_CM_TIMEOUT] = {"cm-timeout", 0, 31, "a timeout code"},
    [NIC_TOPT_CM_RETRIES] = {"cm-retries", 0, 15, "a retry count"},
    [NIC_TOPT_RNR_TIMER] = {"rnr-timer", 0, 31, "an RNR timer code"},
};
