from sagakit.runtime import serve

from pedidos.app import SERVICE, create

if __name__ == "__main__":
    serve(create, SERVICE)
