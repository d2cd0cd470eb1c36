/* The SimGrid peer of hetsim's parameter-server benchmark (bench/bench_ps.sh): the same
 * scenario written with SimGrid's S4U interface, so that both simulators' CPU time and answer
 * can be compared on one machine. Not part of hetsim; built by bench/bench_ps.sh against
 * Debian's libsimgrid-dev (SimGrid 3.32).
 *
 *   simgrid_ps MODE N ITERATIONS BYTES UPDATE_S    MODE: ps-bsp | asp
 *
 * The scenario is that of bench/gen_ps_cluster.sh N with resnet18 and a global batch of 32 N:
 * - N workers, 8 per node, node k of generation k mod 3 (v100, a100, h100), each computing a
 *   step of 32 samples in t0 + 32 per_sample (2 ms + 32 x 0.22, 0.17, 0.051 ms), no jitter;
 * - a star: each worker's own split-duplex link, 25 Gbps and no latency, to the server's
 *   split-duplex link, 100 Gbps and 5 us; a push goes up the worker's link and down the
 *   server's, a pull the other way, so pushes share the server's inbound side and pulls its
 *   outbound side, each flow capped by its worker's 25 Gbps (hetsim's shared link);
 * - CM02 (max-min fair sharing, no TCP or latency correction factors), no cross-traffic.
 * ps-bsp: every worker computes and pushes BYTES; once all N pushes have arrived the server
 * applies one update (UPDATE_S) and sends the model (BYTES) to every worker, which computes
 * again when its copy has arrived. asp: the server applies each push on arrival, in arrival
 * order, UPDATE_S each, then sends that worker the model. Both end at the end of update number
 * ITERATIONS, whose time is printed: hetsim's sim_time_s for the same run. */
#include <simgrid/s4u.hpp>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace sg4 = simgrid::s4u;

namespace {

struct Setup {
  bool bsp;
  int n;
  long iterations;
  double bytes, update_s;
};

double compute_time(int w) {
  static const double per_sample[] = {0.22e-3, 0.17e-3, 0.051e-3};
  return 2e-3 + 32.0 * per_sample[(w / 8) % 3];
}

void worker(const Setup* s, int w) {
  sg4::Actor::self()->daemonize(); /* the run ends when the server does */
  sg4::Mailbox* server = sg4::Mailbox::by_name("server");
  sg4::Mailbox* mine = sg4::Mailbox::by_name("w" + std::to_string(w));
  auto* id = new int(w);
  for (;;) {
    sg4::this_actor::sleep_for(compute_time(w));
    server->put(id, (uint64_t)s->bytes);
    int* model = mine->get<int>();
    (void)model;
  }
}

void param_server(const Setup* s) {
  sg4::Mailbox* in = sg4::Mailbox::by_name("server");
  in->set_receiver(sg4::Actor::self()); /* pushes flow as soon as they are sent */
  std::vector<sg4::Mailbox*> out(s->n);
  for (int w = 0; w < s->n; w++) out[w] = sg4::Mailbox::by_name("w" + std::to_string(w));
  static int model = 0;
  long updates = 0;
  while (updates < s->iterations) {
    if (s->bsp) {
      for (int i = 0; i < s->n; i++) (void)in->get<int>();
      sg4::this_actor::sleep_for(s->update_s);
      updates++;
      if (updates == s->iterations) break;
      for (int w = 0; w < s->n; w++) out[w]->put_init(&model, (uint64_t)s->bytes)->detach();
    } else {
      int* w = in->get<int>();
      sg4::this_actor::sleep_for(s->update_s);
      updates++;
      if (updates == s->iterations) break;
      out[*w]->put_init(&model, (uint64_t)s->bytes)->detach();
    }
  }
  std::printf("sim_time_s %.17g\nupdates %ld\n", sg4::Engine::get_clock(), updates);
  in->set_receiver(nullptr);
}

} // namespace

int main(int argc, char** argv) {
  sg4::Engine e(&argc, argv); /* takes the --cfg=... arguments */
  if (argc != 6 || (std::strcmp(argv[1], "ps-bsp") && std::strcmp(argv[1], "asp"))) {
    std::fprintf(stderr, "usage: %s ps-bsp|asp WORKERS ITERATIONS BYTES UPDATE_S [--cfg=...]\n", argv[0]);
    return 2;
  }
  static Setup s{std::strcmp(argv[1], "ps-bsp") == 0, std::atoi(argv[2]), std::atol(argv[3]),
                 std::atof(argv[4]), std::atof(argv[5])};
  if (s.n < 1 || s.iterations < 1 || !(s.bytes > 0) || !(s.update_s >= 0)) {
    std::fprintf(stderr, "simgrid_ps: bad arguments\n");
    return 2;
  }
  auto* zone = sg4::create_star_zone("ps");
  sg4::Host* srv = zone->create_host("server", 1e9);
  const sg4::Link* srv_link = zone->create_split_duplex_link("server-link", "100Gbps")->set_latency(5e-6)->seal();
  zone->add_route(srv->get_netpoint(), nullptr, nullptr, nullptr,
                  {sg4::LinkInRoute(srv_link, sg4::LinkInRoute::Direction::UP)}, true);
  std::vector<sg4::Host*> hosts(s.n);
  for (int w = 0; w < s.n; w++) {
    std::string name = "w" + std::to_string(w);
    hosts[w] = zone->create_host(name, 1e9);
    const sg4::Link* l = zone->create_split_duplex_link(name + "-link", "25Gbps")->set_latency(0)->seal();
    zone->add_route(hosts[w]->get_netpoint(), nullptr, nullptr, nullptr,
                    {sg4::LinkInRoute(l, sg4::LinkInRoute::Direction::UP)}, true);
  }
  zone->seal();
  sg4::Actor::create("server", srv, param_server, &s);
  for (int w = 0; w < s.n; w++) sg4::Actor::create("worker", hosts[w], worker, &s, w);
  e.run();
  return 0;
}
